//! The CPU time of the `.vis.db` row formatting alone (by hand; not part of the tests):
//! `cargo run --release --example exportbench -- NPU_RANK_DIR BENCH_RANK_DIR MAPPING.yaml [N]
//! [--no-digest]`.
//!
//! Runs the pair once, then formats the NPU and the Bench graph N times each (default 5) on this
//! one thread into a sink that drops the rows, and prints each side's fastest and median time,
//! then formats each once more into a sink that hashes them: the digest of every cell, which
//! must not change when only the speed of the export does (`--no-digest` skips it, e.g. to
//! count instructions under callgrind).
#![allow(clippy::expect_used, clippy::unwrap_used)]
use probelens::formats::dump::{FileNames, RankDump};
use probelens::run::{run_pair, PairInput, RunOptions};
use probelens::visdb::export::{export_graph, GraphExport, NodeRow, Sink, StackRow};
use std::hash::Hasher;

/// The CLI's allocator, so that the many small strings of the rows cost what they cost there.
#[cfg(feature = "cli")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Drops the rows (what the timed runs format into).
struct DropSink;

impl Sink for DropSink {
    fn node(&mut self, _: NodeRow<&str>) {}
    fn stack(&mut self, _: StackRow) {}
}

/// Hashes every cell of every row (FNV-1a: stable across runs and builds).
struct HashSink {
    h: Fnv,
    rows: usize,
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

impl HashSink {
    fn s(&mut self, s: &str) {
        self.h.write(s.as_bytes());
        self.h.write(&[0xff]);
    }
}

impl Sink for HashSink {
    fn node(&mut self, r: NodeRow<&str>) {
        self.rows += 1;
        for s in [
            &r.id,
            &r.graph_id,
            &r.node_name,
            &r.node_type,
            &r.up_node,
            &r.sub_nodes,
            &r.matched_node_link,
            &r.stack_id,
            &r.parallel_merge_info,
            &r.matched_distributed,
            &r.input_data,
            &r.output_data,
        ] {
            self.s(s);
        }
        self.s(&format!(
            "{} {:?} {:?} {} {} {} {:?} {} {} {}",
            r.node_order,
            r.precision_index,
            r.overflow_level,
            r.micro_step_id,
            r.modified,
            r.data_source,
            r.dump_data_dir,
            r.step,
            r.rank,
            r.is_distributed
        ));
    }
    fn stack(&mut self, r: StackRow) {
        self.rows += 1;
        self.s(&r.id);
        self.s(&r.stack_info);
    }
}

fn load(dir: &str) -> RankDump {
    let rd = |f: &str| std::fs::read(format!("{dir}/{f}")).unwrap_or_default();
    let (d, c, s) = (rd("dump.json"), rd("construct.json"), rd("stack.json"));
    RankDump::parse(FileNames::in_dir(dir), &d, &c, &s).expect("parse")
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(5);
    let text = std::fs::read_to_string(&a[3]).expect("mapping");
    let opts = RunOptions {
        layer_mapping: Some(probelens::mapping::LayerMapping::parse(&a[3], &text).expect("yaml")),
        ..Default::default()
    };
    let r = run_pair(PairInput::new(load(&a[1]), Some(load(&a[2]))), &opts).expect("run");
    let sides = [
        GraphExport::npu(&r, 0, 0),
        GraphExport::bench(&r, 0, 0).expect("bench"),
    ];
    for x in &sides {
        let mut times = Vec::new();
        for _ in 0..n {
            let t = std::time::Instant::now();
            export_graph(x, &mut DropSink);
            times.push(t.elapsed().as_secs_f64());
        }
        if a.iter().any(|s| s == "--no-digest") {
            println!(
                "{}: min {:.3} s over {n}",
                x.data_source,
                times.iter().copied().fold(f64::INFINITY, f64::min)
            );
            continue;
        }
        let mut sink = HashSink {
            h: Fnv(0xcbf2_9ce4_8422_2325),
            rows: 0,
        };
        for d in export_graph(x, &mut sink) {
            sink.s(&d.name);
            sink.s(&d.input_data);
        }
        let (h, rows) = (sink.h.finish(), sink.rows);
        times.sort_by(f64::total_cmp);
        println!(
            "{}: min {:.3} s, median {:.3} s over {n}; {rows} rows, digest {h:016x}",
            x.data_source,
            times[0],
            times[times.len() / 2]
        );
    }
}
