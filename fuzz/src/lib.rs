//! The bodies of the fuzz targets, shared by the libFuzzer binaries (`fuzz_targets/`).
//!
//! Each body must never panic, hang or allocate without bound on any input: a `Result` error is
//! the expected outcome for bad bytes.

use probelens::compare::{compare, compare_mode, CompareOptions};
use probelens::formats::dump::{FileNames, RankDump, RankParser};
use probelens::graph::items::Mode;
use probelens::graph::Graph;
use probelens::mapping::{api_mapping, LayerMapping};

/// The valid tiny rank folder of the bad-input corpus (8 nodes of the real Qwen fixture).
pub const BASE_DUMP: &[u8] = include_bytes!("../../tests/bad_inputs/valid_base/npu/dump.json");
pub const BASE_CONSTRUCT: &[u8] =
    include_bytes!("../../tests/bad_inputs/valid_base/npu/construct.json");
pub const BASE_STACK: &[u8] = include_bytes!("../../tests/bad_inputs/valid_base/npu/stack.json");

fn names() -> FileNames {
    FileNames::in_dir("npu")
}

/// Everything a parsed pair goes through: graphs, every node's items, matching and compare.
fn exercise(npu: &RankDump, bench: &RankDump) {
    let (Ok(mut gn), Ok(mut gb)) = (Graph::build(npu), Graph::build(bench)) else {
        return;
    };
    for g in [&gn, &gb] {
        let order = g.post_order();
        let _ = g.pre_order();
        for id in order.iter().take(2000) {
            let _ = g.ancestors(*id);
        }
    }
    for id in gn.pre_order().into_iter().take(2000) {
        let (i, o) = gn.io(npu, id);
        let _ = probelens::graph::items::format_map(&npu.store, &i, "x", Mode::Summary);
        let _ = probelens::graph::items::format_map(&npu.store, &o, "x", Mode::Md5);
    }
    // Layer mapping's items split every dump name of the fuzzed construct.json.
    let _ = api_mapping(npu, bench, &LayerMapping::empty(), None);
    let mode = compare_mode(npu, bench).unwrap_or(Mode::Summary);
    let mut cmp = None;
    for fuzzy in [false, true] {
        let opts = CompareOptions {
            fuzzy,
            layer_mapping: None,
            // As a run compares: rows derived again when exported.
            derive_results: true,
            ..Default::default()
        };
        cmp = Some(compare(&mut gn, npu, &mut gb, bench, mode, &opts));
    }
    // The diagnosis of the compared pair (every node's tensors read from its entry).
    let sides = probelens::compare::Sides {
        gn: &gn,
        dn: npu,
        gb: &gb,
        db: bench,
    };
    let d = probelens::compare::diagnose::diagnose_pair(sides, 0, 0, None);
    let _ = probelens::compare::diagnose::Diagnosis::merge(std::slice::from_ref(&d), 5);
    let _ = probelens::compare::diagnose::trace_pair(sides);
    let _ = gn.paging_by_micro_step(Some(&mut gb));
    gn.apply_overflow(npu);
    // The .vis.db rows of both sides (the export formats every item, with the compare columns).
    for (graph, dump, other, other_dump, comparison) in [
        (&gn, npu, &gb, bench, cmp.as_ref()),
        (&gb, bench, &gn, npu, None),
    ] {
        let x = probelens::visdb::export::GraphExport {
            graph,
            dump,
            other: Some((other, other_dump)),
            comparison,
            mode,
            data_source: "NPU",
            step: 0,
            rank: 0,
            dump_data_dir: None,
        };
        let mut rows = (Vec::new(), Vec::new());
        let _ = probelens::visdb::export::export_graph(&x, &mut rows);
    }
}

/// Everything later stages read from a parsed rank folder, comparably (or the error's text).
/// Also used by `tests/it/streaming.rs`.
pub fn summary(r: &probelens::Result<RankDump>) -> String {
    let d = match r {
        Err(e) => return format!("error: {e}"),
        Ok(d) => d,
    };
    let mut s = format!(
        "task {:?} level {:?} fw {:?}/{:?} dir {:?} data {} {} md5 {} micro {:?}\n",
        d.task,
        d.level,
        d.framework_key,
        d.framework,
        d.dump_data_dir,
        d.has_data_key,
        d.data_is_object,
        d.has_md5,
        d.micro_step_number
    );
    for (i, e) in d.entries.iter().enumerate() {
        let name = d.entry_name(e);
        // The name finds its entry.
        let found = d.entry_id(name) == Some(i as u32);
        s.push_str(&format!(
            "{name} {found} {:?} {}\n",
            e.overflow,
            probelens::formats::pyfmt::py_str(&d.store, d.store.val(e.value))
        ));
    }
    s.push_str(&format!("{:?}\n", d.construct_iter().collect::<Vec<_>>()));
    let mut stack: Vec<_> = d
        .stack_by_name
        .iter()
        .map(|(k, v)| format!("{k}={}", probelens::formats::pyfmt::py_str(&d.store, v)))
        .collect();
    stack.sort();
    s.push_str(&stack.join("\n"));
    s.push_str(&format!("\n{:?}", d.diagnostics));
    s
}

/// A rank folder parsed as the CLI and the page do: dump.json fed in `n`-byte chunks.
pub fn parse_chunked(
    names: FileNames,
    dump: &[u8],
    construct: &[u8],
    stack: &[u8],
    n: usize,
) -> probelens::Result<RankDump> {
    let mut p = RankParser::new(names, dump.len() as u64, stack.len() as u64)?;
    // As `run::load_rank`: construct.json in chunks, again whole only when it is bad.
    for c in construct.chunks(n.max(1)) {
        if !p.construct_chunk(c) {
            break;
        }
    }
    if !p.construct_end() {
        p.construct(construct);
    }
    for c in dump.chunks(n.max(1)) {
        p.dump_chunk(c)?;
    }
    p.dump_end()?;
    p.stack(stack)?;
    Ok(p.finish())
}

/// One input split at its first two NUL bytes into dump.json, construct.json and stack.json.
pub fn dump_parse(data: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == 0);
    let dump = parts.next().unwrap_or(&[]);
    let construct = parts.next().unwrap_or(BASE_CONSTRUCT);
    let stack = parts.next().unwrap_or(BASE_STACK);
    let whole = RankDump::parse(names(), dump, construct, stack);
    // dump.json fed in chunks (as the CLI and the page read it) must give the same result.
    let n = 1 + dump.first().map_or(0, |b| *b as usize % 61);
    let chunked = parse_chunked(names(), dump, construct, stack, n);
    assert_eq!(summary(&whole), summary(&chunked), "{n}-byte chunks");
    let Ok(npu) = whole else {
        return;
    };
    let Ok(bench) = RankDump::parse(names(), BASE_DUMP, BASE_CONSTRUCT, BASE_STACK) else {
        return;
    };
    exercise(&npu, &bench);
}

/// The input is construct.json; dump.json and stack.json are the valid base. The same
/// construct is compared against itself, then against the base graph.
pub fn graph_build(data: &[u8]) {
    let whole = RankDump::parse(names(), BASE_DUMP, data, BASE_STACK);
    // construct.json fed in chunks (as the CLI and the page read it) must give the same result.
    let n = 1 + data.first().map_or(0, |b| *b as usize % 61);
    let chunked = parse_chunked(names(), BASE_DUMP, data, BASE_STACK, n);
    assert_eq!(summary(&whole), summary(&chunked), "{n}-byte chunks");
    let Ok(npu) = whole else {
        return;
    };
    let Ok(same) = RankDump::parse(names(), BASE_DUMP, data, BASE_STACK) else {
        return;
    };
    exercise(&npu, &same);
    if let Ok(base) = RankDump::parse(names(), BASE_DUMP, BASE_CONSTRUCT, BASE_STACK) {
        exercise(&npu, &base);
    }
}

/// The input is a layer-mapping yaml, applied to the base pair.
pub fn mapping(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(lm) = LayerMapping::parse("layer_mapping.yaml", text) else {
        return;
    };
    let (Ok(npu), Ok(bench)) = (
        RankDump::parse(names(), BASE_DUMP, BASE_CONSTRUCT, BASE_STACK),
        RankDump::parse(names(), BASE_DUMP, BASE_CONSTRUCT, BASE_STACK),
    ) else {
        return;
    };
    let _ = api_mapping(&npu, &bench, &lm, None);
    let (Ok(mut gn), Ok(mut gb)) = (Graph::build(&npu), Graph::build(&bench)) else {
        return;
    };
    let opts = CompareOptions {
        fuzzy: false,
        layer_mapping: Some(lm),
        ..Default::default()
    };
    let _ = compare(&mut gn, &npu, &mut gb, &bench, Mode::Summary, &opts);
}
