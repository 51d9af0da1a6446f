//! dump.json and construct.json read in chunks (`RankParser`, what the CLI and the page do) give
//! exactly what a whole-file parse gives: the same model, the same error, message and place, for
//! every rank folder of the fixtures and of the bad-input corpus, cut at every kind of boundary.

// The fuzz bodies' comparable summary and chunked parse (the fuzzer checks the same property).
use crate::bodies::{parse_chunked as chunked, summary};
use probelens::formats::dump::{FileNames, RankDump};
use std::path::{Path, PathBuf};

fn dumps(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut v: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    v.sort();
    for p in v {
        if p.is_dir() {
            dumps(&p, out);
        } else if p.file_name().is_some_and(|n| n == "dump.json") {
            out.push(p);
        }
    }
}

/// Asserts that the folder's files read in chunks of each of `sizes` bytes (construct.json and
/// dump.json) give what a whole-file parse gives.
fn like_whole(dump: &[u8], construct: &[u8], stack: &[u8], sizes: &[usize], what: &str) {
    let names = FileNames::in_dir("r");
    let whole = summary(&RankDump::parse(names.clone(), dump, construct, stack));
    for &n in sizes {
        let got = summary(&chunked(names.clone(), dump, construct, stack, n));
        assert!(
            got == whole,
            "{what}: {n}-byte chunks differ from the whole-file parse:\n--- whole\n{}\n--- chunked\n{}",
            &whole[..whole.len().min(2000)],
            &got[..got.len().min(2000)]
        );
    }
}

fn check(dump: &[u8], construct: &[u8], stack: &[u8], what: &str) -> usize {
    let mut sizes = vec![4093, 65536];
    if dump.len() < 500_000 {
        sizes.push(61);
    }
    if dump.len() < 50_000 {
        sizes.extend([1, 2, 5]);
    }
    like_whole(dump, construct, stack, &sizes, what);
    sizes.len()
}

#[test]
fn chunked_dumps_parse_like_whole_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    dumps(&root.join("fixtures"), &mut files);
    dumps(&root.join("bad_inputs"), &mut files);
    assert!(files.len() > 100, "{} dumps", files.len());
    let mut runs = 0;
    for f in &files {
        let dir = f.parent().unwrap();
        let read = |n: &str| std::fs::read(dir.join(n)).unwrap_or_default();
        let dump = read("dump.json");
        if dump.len() > 20_000_000 {
            continue;
        }
        runs += check(
            &dump,
            &read("construct.json"),
            &read("stack.json"),
            &f.display().to_string(),
        );
    }
    assert!(runs > 300, "{runs}");
}

/// Cuts inside every token kind, near the end of the file, and errors at each place.
#[test]
fn chunked_edge_cases() {
    let ok = br#"{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": {"Functional.a.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": NaN, "Min": -Infinity, "Mean": 1.25e-3, "Norm": 123456789012345678901234, "requires_grad": true}, {"type": "str", "value": "caf\u00e9 \ud83d\ude00 caf\u00e9"}], "input_kwargs": {}, "output": [null]}, "Functional.a.0.forward": null, "Module.m.M.forward.0": {"input_args": [], "output": [{"type": "int", "value": 3}]}}}  "#;
    let mut cases: Vec<Vec<u8>> = vec![ok.to_vec()];
    // With a BOM; without a framework key (the text scan decides); and truncated everywhere.
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(ok);
    cases.push(bom);
    let text = String::from_utf8(ok.to_vec()).unwrap();
    cases.push(
        text.replace("\"framework\": \"pytorch\", ", "")
            .into_bytes(),
    );
    cases.push(
        text.replace("\"framework\": \"pytorch\", ", "")
            .replace("torch.Tensor", "mindspore.Tensor")
            .into_bytes(),
    );
    cases.push(
        text.replace("\"framework\": \"pytorch\", ", "")
            .replace(", \"", ",\n \"")
            .into_bytes(),
    );
    for cut in (0..ok.len()).step_by(7) {
        cases.push(ok[..cut].to_vec());
    }
    for bad in [
        "{\"data\": [1, 2]}",
        "[1, 2]",
        "{\"task\": 3, \"data\": {}}",
        "{\"data\": {\"x\": 5}}",
        "{\"data\": {\"x\": {\"input_args\": 5}}}",
        "{\"data\": {}} x",
        "{\"data\": {}, \"data\": {\"a\": 1}}",
        "{\"data\": {\"a\": {\"input_args\": [{\"type\": \"torch.Tensor\", \"Max\": \"s\"}]}, \"b\": {\"input_args\": [{\"type\": \"torch.Tensor\", \"Max\": \"t\"}]}, \"a\": null}}",
        "{\"data\": {\"a\": \"\\x\"}}",
        "{\"data\": {\"a\": tru}}",
        "   ",
        "",
        "{\n\"data\": {\n\"a\": [1,\n2,,\n3]}}",
    ] {
        cases.push(bad.as_bytes().to_vec());
    }
    let sizes: Vec<usize> = (1..12).collect();
    for (i, c) in cases.iter().enumerate() {
        let what = format!("case {i} ({:?})", String::from_utf8_lossy(c));
        like_whole(c, b"{}", b"{}", &sizes, &what);
    }
}

/// construct.json cut inside every token kind and between members, well formed or not: the
/// same model or the same message as the whole file (a bad one is read again whole).
#[test]
fn chunked_construct_edge_cases() {
    let dump = br#"{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": {"Module.m.M.forward.0": {"input_args": [], "output": [{"type": "int", "value": 3}]}, "Functional.a.0.forward": {"input_args": [], "output": [null]}}}"#;
    let ok = "{\n \"Module.m.M.forward.0\": null,\n \"Functional.a.0.forward\": \"Module.m.M.forward.0\",\n \"Module.caf\\u00e9 \\\"q\\\" {[,]}.forward.0\": \"\",\n \"Functional.a.0.forward\": \"Module.m.M.forward.0\"\n}\n";
    let megatron = r#"{"megatron_micro_step_number": 2, "Module.m.M.forward.0": [null, 1], "Functional.a.0.forward": ["Module.m.M.forward.0", 1.0]}"#;
    let mut cases: Vec<String> = vec![ok.into(), megatron.into(), "{}".into(), " { } ".into()];
    for cut in 0..ok.len() {
        if ok.is_char_boundary(cut) {
            cases.push(ok[..cut].into());
        }
    }
    for bad in [
        "[]",
        "null",
        "{\"a\": 1}",
        "{\"a\": [\"b\"]}",
        "{\"a\": null,}",
        "{\"a\": null} x",
        "{\"a\" null}",
        "{\"a\": nul}",
        "{\"a\": [null, 1]], \"b\": null}",
        "{\"a\": {\"b\": [}}",
        "{a: null}",
        "{\"a\": \"\\x\"}",
        "{\"megatron_micro_step_number\": 1, \"a\": null}",
        "",
        "\u{feff}{}",
    ] {
        cases.push(bad.into());
    }
    // The well-formed ones are read in chunks to the end, the others are handed back.
    let streamed = |c: &str, n: usize| {
        let mut p =
            probelens::formats::dump::RankParser::new(FileNames::in_dir("r"), 0, 0).unwrap();
        for part in c.as_bytes().chunks(n) {
            if !p.construct_chunk(part) {
                break;
            }
        }
        p.construct_end()
    };
    for n in [1, 7, 4096] {
        assert!(streamed(ok, n) && streamed(megatron, n) && streamed(" { } ", n));
        assert!(!streamed(&ok[..ok.len() - 3], n) && !streamed("{\"a\": null,}", n));
        assert!(!streamed("[]", n) && !streamed("", n) && !streamed("{} x", n));
    }
    for (i, c) in cases.iter().enumerate() {
        let what = format!("case {i} ({c:?})");
        like_whole(dump, c.as_bytes(), b"{}", &[1, 2, 3, 5, 8, 13, 4096], &what);
    }
}
