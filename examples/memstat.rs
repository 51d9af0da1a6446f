//! Where the memory of a run goes, stage by stage (by hand; not part of the tests):
#![allow(clippy::expect_used, clippy::unwrap_used)]
//! `cargo run --release --example memstat -- NPU_RANK_DIR BENCH_RANK_DIR MAPPING.yaml`.
use probelens::formats::dump::{FileNames, RankDump};
use probelens::run::{run_pair, PairInput, RunOptions};

fn rss() -> String {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let f = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1000.0)
    };
    format!("RSS {:.0} MB (peak {:.0} MB)", f("VmRSS:"), f("VmHWM:"))
}

fn load(dir: &str) -> RankDump {
    let rd = |f: &str| std::fs::read(format!("{dir}/{f}")).unwrap_or_default();
    let (d, c, s) = (rd("dump.json"), rd("construct.json"), rd("stack.json"));
    let t = std::time::Instant::now();
    let r = RankDump::parse(FileNames::in_dir(dir), &d, &c, &s).expect("parse");
    let mb = |x: usize| x as f64 / 1e6;
    let st = &r.store;
    eprintln!(
        "{dir}: parse {:.2?}; input {:.1} MB; store vals {:.1} text {:.1} MB; {} entries, {} construct",
        t.elapsed(),
        mb(d.len() + c.len() + s.len()),
        mb(st.vals.capacity() * std::mem::size_of::<probelens::formats::json::Packed>()),
        mb(st.text.capacity()),
        r.entries.len(),
        r.construct.len()
    );
    r
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n = load(&a[1]);
    eprintln!("after npu parse: {}", rss());
    let b = load(&a[2]);
    eprintln!("after bench parse: {}", rss());
    let text = std::fs::read_to_string(&a[3]).expect("mapping");
    let opts = RunOptions {
        layer_mapping: Some(probelens::mapping::LayerMapping::parse(&a[3], &text).expect("yaml")),
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let r = run_pair(PairInput::new(n, Some(b)), &opts).expect("run");
    eprintln!("after run ({:.2?}): {}", t.elapsed(), rss());
    eprintln!(
        "nodes {} / {} (Node {} B)",
        r.npu.graph.nodes.len(),
        r.bench.as_ref().map_or(0, |b| b.graph.nodes.len()),
        std::mem::size_of::<probelens::graph::Node>()
    );
    if let (Some(c), Some(sides)) = (&r.comparison, r.sides()) {
        // Derived rows are not held; this is what holding them all would take.
        let nodes = c.nodes_with_results();
        let (mut rows, mut cells, mut keys) = (0usize, 0usize, 0usize);
        for n in &nodes {
            for (k, r) in c.results_of(sides, *n).iter().flat_map(|v| v.iter()) {
                rows += 1;
                cells += r.len();
                keys += k.capacity();
            }
        }
        eprintln!(
            "results: {} nodes ({} stored), {rows} rows, {cells} cells ({} B each), keys {:.1} MB",
            nodes.len(),
            c.results.len(),
            std::mem::size_of::<probelens::graph::cells::Cell>(),
            keys as f64 / 1e6
        );
    }
}
