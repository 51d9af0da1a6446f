//! Many ranks (issue 25): `-j`, `--shard I/N` with `merge-db`, `diagnose --shard` with `--merge`,
//! and the scheduler recipes in `examples/` run as Slurm and Kubernetes would run them. (Every
//! msprobe reference with `-j 2` and as shards: `fidelity::every_variant_*`; every golden case:
//! `golden_output::every_case_*`.)

use crate::common::{read_db, Db};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> PathBuf {
    root().join("tests/fixtures/qwen_two_ranks")
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("probelens-shards-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn probelens(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// The one `.vis.db` in `dir`.
fn the_db(dir: &Path) -> PathBuf {
    let dbs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".vis.db"))
        .collect();
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    dbs[0].clone()
}

fn compare_args<'a>(npu: &'a str, bench: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "graph_visualize",
        "-tp",
        npu,
        "-gp",
        bench,
        "-lm",
        "layer_mapping.yaml",
        "-o",
        out,
        "--no-progress",
    ]
}

/// The db of the two-rank fixture in one run.
fn single_run(tag: &str) -> Db {
    let out = tmp(tag);
    let o = out.display().to_string();
    ok(
        probelens(&compare_args("npu", "bench", &o), &fixture()),
        "single run",
    );
    read_db(&the_db(&out), &fixture())
}

/// A missing shard is named with its ranks; running it again and merging again completes the run.
#[test]
fn a_missing_shard_is_named_and_running_it_again_completes() {
    let want = single_run("want1");
    let shards = tmp("partial");
    let s = shards.display().to_string();
    for i in 0..4 {
        let shard = format!("{i}/4");
        let mut args = compare_args("npu", "bench", &s);
        args.extend(["--shard", &shard]);
        ok(probelens(&args, &fixture()), "shard");
    }
    let lost = shards.join("compare_shard2of4.vis.db");
    std::fs::remove_file(&lost).unwrap();
    let out = tmp("merged1");
    let o = out.display().to_string();
    let parts: Vec<String> = std::fs::read_dir(&shards)
        .unwrap()
        .flatten()
        .map(|e| e.path().display().to_string())
        .collect();
    let mut merge: Vec<&str> = vec!["merge-db", "-o", &o];
    merge.extend(parts.iter().map(String::as_str));
    let r = probelens(&merge, &fixture());
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 of 4 shards missing: shard 2/4 (step 1 ranks 0)"),
        "{err}"
    );
    assert!(std::fs::read_dir(&out).unwrap().next().is_none(), "no db");
    // The lost shard again, then the same merge.
    let mut args = compare_args("npu", "bench", &s);
    args.extend(["--shard", "2/4"]);
    ok(probelens(&args, &fixture()), "shard 2 again");
    merge.push(lost.to_str().unwrap());
    ok(probelens(&merge, &fixture()), "merge");
    assert_eq!(read_db(&the_db(&out), &fixture()), want);
}

/// A shard's partial db opens as a db of its own: its tb_config lists its ranks and steps, its
/// rows are the single run's for them (but `matched_distributed`, which needs every rank).
#[test]
fn a_partial_db_holds_its_units_rows() {
    let want = single_run("want2");
    let shards = tmp("own");
    let s = shards.display().to_string();
    let mut args = compare_args("npu", "bench", &s);
    args.extend(["--shard", "1/2"]);
    ok(probelens(&args, &fixture()), "shard");
    let part = read_db(&shards.join("compare_shard1of2.vis.db"), &fixture());
    let cfg = &part.config["1"];
    assert_eq!(cfg["rank_list"].as_text(), Some("[0, 1]"));
    assert_eq!(cfg["step_list"].as_text(), Some("[1]"));
    assert!(!part.nodes.is_empty());
    let step_of = |row: &crate::common::Row| match row["step"] {
        crate::common::Cell::Int(s) => s,
        ref c => panic!("step {c:?}"),
    };
    for (id, row) in &part.nodes {
        assert_eq!(step_of(row), 1, "{id}: a step 1 row");
        let mut w = want.nodes[id].clone();
        w.insert(
            "matched_distributed".into(),
            row["matched_distributed"].clone(),
        );
        assert_eq!(&w, row, "{id}");
    }
    let step1 = want.nodes.values().filter(|r| step_of(r) == 1).count();
    assert_eq!(part.nodes.len(), step1);
}

/// Partial dbs that are not the shards of one run, and bad shard arguments, are refused with the
/// file and the reason.
#[test]
fn bad_shards_are_refused() {
    let shards = tmp("bad");
    let s = shards.display().to_string();
    for (i, extra) in [("0/2", None), ("1/2", Some("-fm")), ("1/3", None)] {
        let mut args = compare_args("npu", "bench", &s);
        args.extend(["--shard", i]);
        args.extend(extra);
        ok(probelens(&args, &fixture()), "shard");
    }
    let p = |n: &str| shards.join(n).display().to_string();
    let out = shards.join("out").display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![p("compare_shard0of2.vis.db"), p("compare_shard1of2.vis.db")],
            "is of another run than",
        ),
        (
            vec![p("compare_shard0of2.vis.db"), p("compare_shard1of3.vis.db")],
            "is of another run than",
        ),
        (
            vec![p("compare_shard0of2.vis.db"), p("compare_shard0of2.vis.db")],
            "shard 0/2 is given twice",
        ),
        (vec![p("nothing.vis.db")], "nothing.vis.db"),
        (vec![p("text.vis.db")], "text.vis.db: not a SQLite database"),
        (vec![p("cut.vis.db")], "cut.vis.db: not a SQLite database"),
    ];
    std::fs::write(shards.join("text.vis.db"), "not a database at all\n").unwrap();
    std::fs::write(shards.join("cut.vis.db"), b"SQLite").unwrap();
    for (inputs, want) in cases {
        let mut args: Vec<&str> = vec!["merge-db", "-o", &out];
        args.extend(inputs.iter().map(String::as_str));
        let r = probelens(&args, &fixture());
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{inputs:?}: {err}");
        assert!(err.contains(want), "{inputs:?}: {err}");
    }
    // A whole db is not a partial one.
    let whole = tmp("whole");
    let w = whole.display().to_string();
    ok(
        probelens(&compare_args("npu", "bench", &w), &fixture()),
        "whole",
    );
    let db = the_db(&whole).display().to_string();
    let r = probelens(&["merge-db", "-o", &out, &db], &fixture());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("not a partial db of `graph_visualize --shard I/N`"),
        "{err}"
    );
    for (args, want) in [
        (vec!["--shard", "4/4"], "argument --shard: '4/4' is not I/N"),
        (vec!["--shard", "x"], "argument --shard: 'x' is not I/N"),
        (
            vec!["-j", "0"],
            "argument -j: '0' is not a positive integer",
        ),
        (
            vec!["--max-memory", "lots"],
            "argument --max-memory: 'lots' is not a size",
        ),
        (vec!["--shard", "0/2", "--no-db"], "not with --no-db"),
    ] {
        let mut a = compare_args("npu", "bench", &w);
        a.extend(args.iter().copied());
        let r = probelens(&a, &fixture());
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success() && err.contains(want), "{args:?}: {err}");
    }
    let r = probelens(&["merge-db", "-o", &out], &fixture());
    assert_eq!(r.status.code(), Some(2));
}

/// A tree of 16 ranks × 2 steps (the fixture's two rank folders copied), as `-j 1`, `-j 2`, four
/// shards merged, and `-j 2` under a memory budget too small for two units at once (they then run
/// one at a time, with a warning for a unit over it): the same db.
#[test]
fn sixteen_ranks_the_same_db_whatever_the_jobs_and_shards() {
    let tree = tmp("tree16");
    for side in ["npu", "bench"] {
        for step in 0..2 {
            for rank in 0..16 {
                let from = fixture().join(format!("{side}/step{step}/rank{}", rank % 2));
                let to = tree.join(format!("{side}/step{step}/rank{rank}"));
                std::fs::create_dir_all(&to).unwrap();
                for f in ["dump.json", "construct.json", "stack.json"] {
                    std::fs::copy(from.join(f), to.join(f)).unwrap();
                }
            }
        }
    }
    std::fs::copy(
        fixture().join("layer_mapping.yaml"),
        tree.join("layer_mapping.yaml"),
    )
    .unwrap();
    let run = |tag: &str, extra: &[&str]| -> (Db, String) {
        let out = tree.join(tag);
        let o = out.display().to_string();
        let mut args = compare_args("npu", "bench", &o);
        args.extend(extra);
        let r = probelens(&args, &tree);
        let err = String::from_utf8_lossy(&r.stderr).to_string();
        ok(r, tag);
        (read_db(&the_db(&out), &tree), err)
    };
    let (one, _) = run("j1", &["-j", "1"]);
    assert_eq!(
        one.nodes
            .keys()
            .filter(|k| k.starts_with("NPU_1_15_"))
            .count(),
        one.nodes
            .keys()
            .filter(|k| k.starts_with("NPU_0_1_"))
            .count()
    );
    assert_eq!(
        one.config["1"]["rank_list"].as_text(),
        Some(&*format!(
            "[{}]",
            (0..16)
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    );
    let (two, _) = run("j2", &["-j", "2"]);
    assert!(two == one, "-j 2 differs from -j 1");
    let (tight, err) = run("tight", &["-j", "4", "--max-memory", "1M"]);
    assert!(tight == one, "-j 4 --max-memory 1M differs");
    assert!(err.contains("over the memory budget of"), "{err}");
    let shards = tree.join("shards");
    let s = shards.display().to_string();
    for i in 0..4 {
        let shard = format!("{i}/4");
        let mut args = compare_args("npu", "bench", &s);
        args.extend(["--shard", &shard, "-j", "2"]);
        ok(probelens(&args, &tree), "shard");
    }
    let merged = tree.join("merged");
    let m = merged.display().to_string();
    let parts: Vec<String> = (0..4)
        .map(|i| {
            shards
                .join(format!("compare_shard{i}of4.vis.db"))
                .display()
                .to_string()
        })
        .collect();
    let mut args: Vec<&str> = vec!["merge-db", "-o", &m];
    args.extend(parts.iter().map(String::as_str));
    ok(probelens(&args, &tree), "merge");
    assert!(
        read_db(&the_db(&merged), &tree) == one,
        "merged shards differ"
    );
}

/// `diagnose` over the multi-rank cases of the diagnosis test set: the same JSON with `-j 2`, and
/// from four `--shard I/4 --json` parts joined by `--merge`.
#[test]
fn diagnose_the_same_with_jobs_and_as_merged_parts() {
    let set = root().join("tests/fixtures/diagnose");
    for (npu, bench, lm) in [
        ("runs/npu2_attn_scale_l0", "runs/hf2_clean", true),
        ("runs/npu2_rank1_fc2_noise_l1", "runs/hf2_clean", true),
        ("runs/npu2_rank1_mlp_gelu_l0", "runs/npu2_clean", false),
        ("runs/npu2_clean", "runs/hf2_clean", true),
    ] {
        let mapping = root().join("tests/fixtures/qwen_mix_statistics/layer_mapping.yaml");
        let m = mapping.display().to_string();
        let mut base: Vec<&str> = vec!["diagnose", "-tp", npu, "-gp", bench, "--json"];
        if lm {
            base.extend(["-lm", &m]);
        }
        let run = |extra: &[&str]| {
            let mut a = base.clone();
            a.extend(extra);
            ok(probelens(&a, &set), npu)
        };
        let single = run(&[]);
        assert!(single.contains("\"verdict\""), "{single}");
        assert_eq!(run(&["-j", "2"]), single, "{npu}: -j 2");
        let dir = tmp("parts");
        let mut parts = Vec::new();
        for i in [3, 1, 0, 2] {
            let part = run(&["--shard", &format!("{i}/4")]);
            let p = dir.join(format!("part{i}.json"));
            std::fs::write(&p, part).unwrap();
            parts.push(p.display().to_string());
        }
        let mut merge: Vec<&str> = vec!["diagnose", "--json", "--merge"];
        merge.extend(parts.iter().map(String::as_str));
        assert_eq!(
            ok(probelens(&merge, &set), npu),
            single,
            "{npu}: merged parts"
        );
        // Without one part: named, with its ranks.
        let r = probelens(&merge[..merge.len() - 1], &set);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(
            err.contains("1 of 4 parts missing: part 2/4 (step 1 ranks 0)"),
            "{err}"
        );
    }
    let r = probelens(
        &[
            "diagnose",
            "-tp",
            "runs/npu2_clean",
            "-gp",
            "runs/hf2_clean",
            "--shard",
            "0/2",
        ],
        &set,
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("add --json"));
}

/// The commands of `examples/slurm/compare.sbatch` and `examples/k8s/compare-job.yaml`, run as the
/// scheduler runs them: each array task / completion index as its own process with the variables
/// Slurm / Kubernetes set, then the merge; the merged db equals the single run's.
#[test]
fn the_scheduler_recipes_give_the_single_runs_db() {
    let want = single_run("want3");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_probelens"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let f = fixture();
    let dumps = [
        ("NPU_DUMP", f.join("npu")),
        ("BENCH_DUMP", f.join("bench")),
        ("MAPPING", f.join("layer_mapping.yaml")),
    ];
    // Slurm: the array tasks, then the merge job, each running the script.
    let out = tmp("slurm");
    let script = root().join("examples/slurm/compare.sbatch");
    let n = 3;
    for task in (0..=n).map(Some).chain([None]) {
        let mut c = Command::new("bash");
        c.arg(&script)
            .envs(dumps.iter().map(|(k, v)| (*k, v.as_os_str())))
            .env("OUT", &out)
            .env("SHARDS", n.to_string())
            .env("PATH", &path)
            .current_dir(&f);
        match task {
            Some(i) if i < n => {
                c.env("SLURM_JOB_ID", "100")
                    .env("SLURM_ARRAY_TASK_ID", i.to_string())
                    .env("SLURM_ARRAY_TASK_COUNT", n.to_string());
            }
            Some(_) => continue,
            None => {
                c.env("SLURM_JOB_ID", "101").env("PROBELENS_MERGE", "1");
            }
        }
        ok(c.output().unwrap(), &format!("sbatch task {task:?}"));
    }
    assert_eq!(read_db(&the_db(&out), &f), want, "Slurm recipe");

    // Kubernetes: the Indexed Job's command per index, then the merge Job's init and main commands.
    let text = std::fs::read_to_string(root().join("examples/k8s/compare-job.yaml")).unwrap();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2);
    let shards_job = &docs[0];
    assert_eq!(
        shards_job["spec"]["completionMode"].as_str(),
        Some("Indexed")
    );
    let completions = shards_job["spec"]["completions"].as_u64().unwrap();
    let container = |doc: &serde_yaml::Value, key: &str| -> (Vec<String>, Vec<(String, String)>) {
        let c = &doc["spec"]["template"]["spec"][key][0];
        let cmd: Vec<String> = c["command"]
            .as_sequence()
            .unwrap()
            .iter()
            .chain(c["args"].as_sequence().unwrap())
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let env = c["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (cmd, env)
    };
    let out = tmp("k8s");
    // The pods' env, with the volume's paths replaced by the fixture's.
    let local = |env: Vec<(String, String)>| -> Vec<(String, String)> {
        env.into_iter()
            .map(|(k, v)| {
                let v = match k.as_str() {
                    "OUT" => out.display().to_string(),
                    "MERGE_WAIT_SECONDS" => "0".into(),
                    _ => dumps
                        .iter()
                        .find(|(d, _)| *d == k)
                        .map_or(v, |(_, p)| p.display().to_string()),
                };
                (k, v)
            })
            .collect()
    };
    let sh = |cmd: &[String], env: &[(String, String)], extra: &[(&str, String)], what: &str| {
        assert_eq!(
            cmd[..2],
            ["/bin/sh".to_string(), "-c".to_string()],
            "{what}"
        );
        let o = Command::new(&cmd[0])
            .args(&cmd[1..])
            .env_clear()
            .env("PATH", &path)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(&f)
            .output()
            .unwrap();
        ok(o, what);
    };
    let (cmd, env) = container(shards_job, "containers");
    let env = local(env);
    let shards_env = env.iter().find(|(k, _)| k == "SHARDS").unwrap().1.clone();
    assert_eq!(shards_env, completions.to_string(), "SHARDS = completions");
    // Fewer indexes than the file's 16 keep the test short: SHARDS and completions change together.
    let n = 3;
    let with_n = |env: Vec<(String, String)>| -> Vec<(String, String)> {
        env.into_iter()
            .map(|(k, v)| {
                if k == "SHARDS" {
                    (k, n.to_string())
                } else {
                    (k, v)
                }
            })
            .collect()
    };
    let env = with_n(env);
    for i in 0..n {
        sh(
            &cmd,
            &env,
            &[("JOB_COMPLETION_INDEX", i.to_string())],
            "shard index",
        );
    }
    let merge_job = &docs[1];
    for key in ["initContainers", "containers"] {
        let (cmd, env) = container(merge_job, key);
        let env = with_n(local(env));
        sh(&cmd, &env, &[], key);
    }
    assert_eq!(read_db(&the_db(&out), &f), want, "Kubernetes recipe");
}
