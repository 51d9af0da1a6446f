//! The fuzz targets' bodies (`fuzz/src/lib.rs`) built and run by `cargo test` on their seeds
//! (the bad-input corpus and the mappings): the fuzz crate is not part of the build, so this
//! keeps it compiling and replays the seeds every time (a body must never panic).

use crate::bodies;
use std::path::Path;

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_default()
}

#[test]
fn fuzz_bodies_run_on_their_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases: Vec<_> = std::fs::read_dir(root.join("tests/bad_inputs"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("npu"))
        .filter(|p| p.join("dump.json").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() > 20, "{}", cases.len());
    for c in &cases {
        let mut seed = read(&c.join("dump.json"));
        if seed.len() > 1 << 20 {
            continue;
        }
        seed.push(0);
        seed.extend(read(&c.join("construct.json")));
        seed.push(0);
        seed.extend(read(&c.join("stack.json")));
        bodies::dump_parse(&seed);
        bodies::graph_build(&read(&c.join("construct.json")));
    }
    let mut maps = 0;
    for dir in ["mappings", "tests/fixtures/qwen_mix_statistics"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "yaml") {
                bodies::mapping(&read(&e.path()));
                maps += 1;
            }
        }
    }
    assert!(maps > 0);
}
