//! Properties over every fixture dump (no extra crates):
//!
//! - a dump compared with itself matches every node, with precision 0 (or none) and zero diffs;
//! - results do not depend on the order in which a folder's files are listed (`Files::list`).

use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::compare::pair::PairResult;
use probelens::compare::Sides;
use probelens::graph::cells::ItemResult;
use probelens::graph::items::Py;
use probelens::run::{self, PairInput, RunOptions};
use probelens::visdb::export::{self, GraphExport, NodeRow, StackRow};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A dump folder in memory; `list` returns entries in an order shuffled by `seed`.
struct MemFiles {
    files: BTreeMap<String, Vec<u8>>,
    seed: u64,
}

impl MemFiles {
    fn load(root: &Path, seed: u64) -> MemFiles {
        fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let r = probelens::base::join_path(rel, &name);
                if e.path().is_dir() {
                    walk(&e.path(), &r, out);
                } else {
                    out.insert(r, std::fs::read(e.path()).unwrap());
                }
            }
        }
        let mut files = BTreeMap::new();
        walk(root, "", &mut files);
        MemFiles { files, seed }
    }
}

/// A small deterministic generator (xorshift) for shuffles.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

impl Files for MemFiles {
    fn list(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut out: Vec<(String, bool)> = Vec::new();
        for path in self.files.keys() {
            if let Some(rest) = path.strip_prefix(&prefix) {
                let (name, is_dir) = match rest.split_once('/') {
                    Some((d, _)) => (d, true),
                    None => (rest, false),
                };
                if !out.iter().any(|(n, _)| n == name) {
                    out.push((name.to_string(), is_dir));
                }
            }
        }
        if self.seed != 0 {
            shuffle(&mut out, self.seed);
        }
        Ok(out)
    }
    fn read(&self, path: &str) -> Result<Cow<'_, [u8]>> {
        self.files
            .get(path)
            .map(|b| Cow::Borrowed(b.as_slice()))
            .ok_or_else(|| Error::input(path, "file not found"))
    }
}

/// Every dump root of the fixtures (npu, bench, bench_L0 ...).
fn roots() -> Vec<PathBuf> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for case in std::fs::read_dir(&fixtures).unwrap().flatten() {
        if !case.path().is_dir() {
            continue;
        }
        for side in std::fs::read_dir(case.path()).unwrap().flatten() {
            let name = side.file_name().to_string_lossy().into_owned();
            if side.path().is_dir() && (name.starts_with("npu") || name.starts_with("bench")) {
                out.push(side.path());
            }
        }
    }
    out.sort();
    assert!(out.len() >= 8, "{out:?}");
    out
}

/// Everything written for a compare of `npu` with `bench`, as db rows.
fn run_all(npu: &MemFiles, bench: &MemFiles) -> (run::Plan, Vec<NodeRow>, Vec<StackRow>) {
    run_all_with(npu, bench, &RunOptions::default())
}

fn run_all_with(
    npu: &MemFiles,
    bench: &MemFiles,
    opts: &RunOptions,
) -> (run::Plan, Vec<NodeRow>, Vec<StackRow>) {
    let plan = run::plan(npu, Some(bench)).unwrap();
    let mut sink: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
    for p in &plan.pairs {
        let nd = run::load_rank(npu, &p.npu_dir).unwrap();
        let bd = run::load_rank(bench, p.bench_dir.as_deref().unwrap()).unwrap();
        let res = run::run_pair(PairInput::new(nd, Some(bd)), opts).unwrap();
        let xs = [
            GraphExport::npu(&res, p.step, p.rank),
            GraphExport::bench(&res, p.step, p.rank).unwrap(),
        ];
        for x in &xs {
            export::export_graph(x, &mut sink);
        }
    }
    (plan, sink.0, sink.1)
}

/// A compare column that must be zero for identical inputs: a number, or a text such as "0.0%".
fn is_zero_or_na(store: &probelens::formats::json::Store, v: &Py) -> bool {
    if let Some(n) = v.num(store) {
        return n.as_f64() == 0.0 || n.as_f64().is_nan();
    }
    match v.as_str(store) {
        Some(s) => match s.trim_end_matches('%').parse::<f64>() {
            Ok(x) => x == 0.0 || x.is_nan(),
            Err(_) => true, // "N/A", "Nan", "" ...
        },
        None => true, // None
    }
}

#[test]
fn a_dump_compared_with_itself_is_all_pass() {
    // The eight diff and relative-error columns.
    let diff_keys = &probelens::compare::STAT_COLUMNS[..8];
    let mut rows = 0;
    for root in roots() {
        let f = MemFiles::load(&root, 0);
        let plan = run::plan(&f, Some(&f)).unwrap();
        assert!(!plan.pairs.is_empty());
        for p in &plan.pairs {
            let a = run::load_rank(&f, &p.npu_dir).unwrap();
            let b = run::load_rank(&f, &p.npu_dir).unwrap();
            let res = run::run_pair(PairInput::new(a, Some(b)), &RunOptions::default()).unwrap();
            let where_ = format!("{} step {} rank {}", root.display(), p.step, p.rank);
            assert!(
                res.diagnostics.is_empty(),
                "{where_}: {:?}",
                res.diagnostics
            );
            let g = &res.npu.graph;
            let reachable = g.pre_order();
            for id in &reachable {
                let n = g.node(*id);
                assert!(n.partner().is_some(), "{where_}: {} unmatched", g.name(*id));
                if let Some(pr) = n.precision() {
                    assert_eq!(pr.0, 0.0, "{where_}: {} precision {}", g.name(*id), pr.0);
                }
            }
            let cmp = res.comparison.as_ref().unwrap();
            let sides = res.sides().unwrap();
            for node in cmp.nodes_with_results() {
                for (item, cols) in cmp.results_of(sides, node).unwrap().iter() {
                    let cols: &ItemResult = cols;
                    rows += 1;
                    for (key, v) in cols.iter() {
                        if diff_keys.contains(&key) {
                            assert!(
                                is_zero_or_na(&res.npu.dump.store, &v),
                                "{where_}: node {} item {item}: {} = {v:?}",
                                g.name(node),
                                res.npu.dump.store.key(key)
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(rows > 1000, "only {rows} compare rows checked");
}

/// The rows a run derives again when it writes or shows a node (`derive_results`) are the rows
/// the compare made, with the same verdicts, on every fixture pair, with and without a layer
/// mapping and fuzzy matching; after a manual re-match too.
#[test]
fn derived_rows_are_the_compared_rows() {
    use probelens::compare::{compare, compare_mode, manual_match, CompareOptions};
    use probelens::graph::Graph;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    for case in std::fs::read_dir(&fixtures).unwrap().flatten() {
        let (n, b) = (case.path().join("npu"), case.path().join("bench"));
        if !n.is_dir() || !b.is_dir() {
            continue;
        }
        let (fnp, fb) = (MemFiles::load(&n, 0), MemFiles::load(&b, 0));
        let plan = run::plan(&fnp, Some(&fb)).unwrap();
        let lm = case.path().join("layer_mapping.yaml");
        let mapping = lm.is_file().then(|| {
            let text = std::fs::read_to_string(&lm).unwrap();
            probelens::mapping::LayerMapping::parse("layer_mapping.yaml", &text).unwrap()
        });
        for p in &plan.pairs {
            let dn = run::load_rank(&fnp, &p.npu_dir).unwrap();
            let db = run::load_rank(&fb, p.bench_dir.as_ref().unwrap()).unwrap();
            let Ok(mode) = compare_mode(&dn, &db) else {
                continue;
            };
            for (fuzzy, layer_mapping) in [(false, None), (true, None), (false, mapping.clone())] {
                let mut graphs =
                    [0, 1].map(|_| (Graph::build(&dn).unwrap(), Graph::build(&db).unwrap()));
                let [(gn0, gb0), (gn1, gb1)] = &mut graphs;
                let opts = |derive_results| CompareOptions {
                    fuzzy,
                    layer_mapping: layer_mapping.clone(),
                    derive_results,
                    ..Default::default()
                };
                let mut stored = compare(gn0, &dn, gb0, &db, mode, &opts(false));
                let mut derived = compare(gn1, &dn, gb1, &db, mode, &opts(true));
                // One manual re-match on both: the first matched NPU module gets its partner again.
                if let Some(n) = (0..gn0.nodes.len() as u32)
                    .find(|n| gn0.nodes[*n as usize].partner().is_some() && *n != 0)
                {
                    let b = gn0.nodes[n as usize].partner().unwrap();
                    manual_match(gn0, &dn, gb0, &db, mode, &mut stored, n, b, true);
                    manual_match(gn1, &dn, gb1, &db, mode, &mut derived, n, b, true);
                }
                let where_ = format!(
                    "{} rank {} fuzzy {fuzzy} lm {}",
                    case.path().display(),
                    p.rank,
                    layer_mapping.is_some()
                );
                assert!(
                    derived.results.is_empty(),
                    "{where_}: derived rows were stored"
                );
                assert_eq!(
                    stored.nodes_with_results(),
                    derived.nodes_with_results(),
                    "{where_}"
                );
                let s0 = Sides {
                    gn: gn0,
                    dn: &dn,
                    gb: gb0,
                    db: &db,
                };
                let s1 = Sides {
                    gn: gn1,
                    dn: &dn,
                    gb: gb1,
                    db: &db,
                };
                for node in stored.nodes_with_results() {
                    let a = stored.results_of(s0, node);
                    let z = derived.results_of(s1, node);
                    assert!(matches!(a, Some(std::borrow::Cow::Borrowed(_))), "{where_}");
                    assert!(matches!(z, Some(std::borrow::Cow::Owned(_))), "{where_}");
                    assert_eq!(a, z, "{where_}: node {}", gn0.name(node));
                    checked += 1;
                }
                for (x, y) in gn0.nodes.iter().zip(&gn1.nodes) {
                    assert_eq!(
                        (x.precision(), x.partner()),
                        (y.precision(), y.partner()),
                        "{where_}: {}",
                        gn0.name_of(x)
                    );
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} nodes checked");
}

#[test]
fn results_do_not_depend_on_listing_order() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut pairs = 0;
    for case in std::fs::read_dir(&fixtures).unwrap().flatten() {
        let (n, b) = (case.path().join("npu"), case.path().join("bench"));
        if !n.is_dir() || !b.is_dir() {
            continue;
        }
        pairs += 1;
        let reference = run_all(&MemFiles::load(&n, 0), &MemFiles::load(&b, 0));
        for seed in [1u64, 7, 42] {
            let shuffled = run_all(&MemFiles::load(&n, seed), &MemFiles::load(&b, seed + 100));
            assert_eq!(
                reference.0,
                shuffled.0,
                "{}: plan, seed {seed}",
                case.path().display()
            );
            assert!(
                reference.1 == shuffled.1,
                "{}: node rows differ, seed {seed}",
                case.path().display()
            );
            assert!(
                reference.2 == shuffled.2,
                "{}: stack rows differ, seed {seed}",
                case.path().display()
            );
        }
    }
    assert!(pairs >= 4);
}

/// The CLI's two threads (`RunOptions::join`) do the same work as one thread.
fn two_threads(a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
    std::thread::scope(|s| {
        s.spawn(b);
        a();
    });
}

/// Every fixture with both sides, under the three matchings (default, fuzzy, the fixture's layer
/// mapping if it has one): `f(case, npu, bench, options)`; returns how many runs were made.
fn each_fixture_matching(mut f: impl FnMut(&Path, &MemFiles, &MemFiles, RunOptions)) -> usize {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut runs = 0;
    for case in std::fs::read_dir(&fixtures).unwrap().flatten() {
        let (n, b) = (case.path().join("npu"), case.path().join("bench"));
        if !n.is_dir() || !b.is_dir() {
            continue;
        }
        let (nf, bf) = (MemFiles::load(&n, 0), MemFiles::load(&b, 0));
        let yaml = case.path().join("layer_mapping.yaml");
        let mapping = std::fs::read_to_string(&yaml)
            .ok()
            .map(|t| probelens::mapping::LayerMapping::parse("layer_mapping.yaml", &t).unwrap());
        for (fuzzy, layer_mapping) in [(false, None), (true, None), (false, mapping)] {
            let opts = RunOptions {
                fuzzy,
                layer_mapping,
                ..RunOptions::default()
            };
            f(&case.path(), &nf, &bf, opts);
            runs += 1;
        }
    }
    runs
}

/// The CLI compares each pair once, as its rows are written (`defer_verdicts`): the rows
/// (verdicts, compare columns, distributed nodes) are those of the compare made up front.
#[test]
fn deferred_verdicts_do_not_change_results() {
    let mut judged = 0;
    let runs = each_fixture_matching(|case, nf, bf, mut opts| {
        opts.join = Some(two_threads);
        let eager = run_all_with(nf, bf, &opts);
        opts.defer_verdicts = true;
        let deferred = run_all_with(nf, bf, &opts);
        assert!(
            eager.1 == deferred.1 && eager.2 == deferred.2,
            "{}: fuzzy {}: rows differ with deferred verdicts",
            case.display(),
            opts.fuzzy
        );
        judged += deferred
            .1
            .iter()
            .filter(|r| r.precision_index.is_some())
            .count();
    });
    assert!(runs >= 6, "{runs}");
    // Not vacuous: rows with verdicts were compared.
    assert!(judged >= 1000, "{judged}");
}

#[test]
fn threads_do_not_change_results() {
    let runs = each_fixture_matching(|case, nf, bf, mut opts| {
        let one = run_all_with(nf, bf, &opts);
        opts.join = Some(two_threads);
        let two = run_all_with(nf, bf, &opts);
        assert!(
            one.1 == two.1 && one.2 == two.2,
            "{}: fuzzy {}: rows differ with two threads",
            case.display(),
            opts.fuzzy
        );
    });
    assert!(runs >= 6, "{runs}");
}

/// The CLI makes each side's graph and layer-mapping part as soon as that side is parsed
/// (`run::Prepared`): the rows are those of `run_pair`, whichever sides come prepared, and a
/// side prepared from another dump than the pair's (in memory) is made again.
#[test]
fn prepared_sides_do_not_change_results() {
    use std::sync::Arc;
    let mut mapped = 0;
    let runs = each_fixture_matching(|case, nf, bf, mut opts| {
        opts.join = Some(two_threads);
        let plan = run::plan(nf, Some(bf)).unwrap();
        let rows = |res: &PairResult, p: &run::PairPlan| {
            let mut sink: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
            for x in [
                GraphExport::npu(res, p.step, p.rank),
                GraphExport::bench(res, p.step, p.rank).unwrap(),
            ] {
                export::export_graph(&x, &mut sink);
            }
            sink
        };
        for p in &plan.pairs {
            let load = |f: &MemFiles, dir: &str| Arc::new(run::load_rank(f, dir).unwrap());
            let (dn, db) = (
                load(nf, &p.npu_dir),
                load(bf, p.bench_dir.as_deref().unwrap()),
            );
            let said = |res: &PairResult| -> Vec<String> {
                res.diagnostics.iter().map(|d| d.to_string()).collect()
            };
            for defer in [false, true] {
                opts.defer_verdicts = defer;
                let want =
                    run::run_pair(PairInput::shared(dn.clone(), Some(db.clone())), &opts).unwrap();
                let (want, want_said) = (rows(&want, p), said(&want));
                let lm = opts.layer_mapping.as_ref();
                // The last two: one side's work made of the other side's dump (it must be
                // ignored and made again).
                for (npu_from, bench_from) in [
                    (&dn, Some(&db)),
                    (&dn, None),
                    (&db, Some(&db)),
                    (&dn, Some(&dn)),
                ] {
                    let np = run::Prepared::new(npu_from, lm, opts.join);
                    let bp = bench_from.map(|d| run::Prepared::new_bench(d, lm, None));
                    let res = run::run_pair(
                        PairInput {
                            npu: dn.clone(),
                            bench: Some(db.clone()),
                            npu_prepared: Some(np),
                            bench_prepared: bp,
                            checkers: run::Checkers::Standard,
                        },
                        &opts,
                    )
                    .unwrap();
                    let where_ = format!(
                        "{}: fuzzy {} lm {} deferred {defer}",
                        case.display(),
                        opts.fuzzy,
                        lm.is_some()
                    );
                    assert!(
                        rows(&res, p) == want,
                        "{where_}: rows differ with prepared sides"
                    );
                    assert_eq!(said(&res), want_said, "{where_}: diagnostics differ");
                }
            }
            let lm = opts.layer_mapping.as_ref();
            mapped += usize::from(lm.is_some());
        }
    });
    assert!(runs >= 6, "{runs}");
    // Not vacuous: pairs with a layer mapping were prepared.
    assert!(mapped >= 2, "{mapped}");
}

/// The CLI formats a compared pair's rows as pairs (`export::PairRows`: an NPU row writes the
/// Bench row of the partner its compare derives): in parts of any size, the rows and the
/// distributed nodes are those of `export_graph` on each graph, and every Bench row is written
/// once.
#[test]
fn paired_rows_are_the_graphs_rows() {
    use probelens::visdb::export::{DistNode, GraphRows, PairRows};
    let mut with_partner = 0;
    let runs = each_fixture_matching(|case, nf, bf, mut opts| {
        opts.defer_verdicts = true;
        let plan = run::plan(nf, Some(bf)).unwrap();
        for p in &plan.pairs {
            let nd = run::load_rank(nf, &p.npu_dir).unwrap();
            let bd = run::load_rank(bf, p.bench_dir.as_deref().unwrap()).unwrap();
            let res = run::run_pair(PairInput::new(nd, Some(bd)), &opts).unwrap();
            let xs = [
                GraphExport::npu(&res, p.step, p.rank),
                GraphExport::bench(&res, p.step, p.rank).unwrap(),
            ];
            let key = |d: &DistNode| (d.name.clone(), d.input_data.clone(), d.precision);
            let mut want: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
            let want_dist: Vec<Vec<_>> = xs
                .iter()
                .map(|x| {
                    let d = export::export_graph(x, &mut want);
                    d.iter().map(key).collect()
                })
                .collect();
            // A deferred compare's warnings, as one writer over each whole graph gives them (the
            // fixtures have none; deferred_warnings_are_the_compares has a pair that gives one).
            let want_warnings: Vec<Vec<String>> = xs
                .iter()
                .map(|x| {
                    let r = GraphRows::new(x);
                    let mut w = r.writer();
                    r.write(&mut w, 0..r.len(), &mut (Vec::<NodeRow>::new(), Vec::new()));
                    w.warnings
                        .iter()
                        .map(|(o, d)| format!("{o}: {d}"))
                        .collect()
                })
                .collect();
            let rows = PairRows::new(GraphRows::new(&xs[0]), Some(GraphRows::new(&xs[1])));
            let mut paired_per_part = None;
            for part in [1, 7, 4096] {
                let mut w = rows.writers();
                type Rows = (Vec<NodeRow>, Vec<StackRow>);
                let (mut own, mut partners): (Rows, Rows) = Default::default();
                let mut got: Rows = Default::default();
                let mut dist = Vec::new();
                for (g, &len) in rows.lens().iter().enumerate() {
                    for a in (0..len).step_by(part) {
                        let range = a..(a + part).min(len);
                        dist.extend(rows.write(g, &mut w, range, &mut own, &mut partners));
                    }
                }
                // As many Bench rows go with NPU rows whatever the parts' size.
                let paired = *paired_per_part.get_or_insert(partners.0.len());
                assert_eq!(
                    partners.0.len(),
                    paired,
                    "{}: part {part}: Bench rows written with NPU rows",
                    case.display()
                );
                with_partner += partners.0.len();
                let mut warnings: Vec<Vec<String>> = vec![Vec::new(); 2];
                let mut met = w.warnings();
                met.sort_by_key(|(g, o, _)| (*g, *o));
                for (g, o, d) in met {
                    warnings[g].push(format!("{o}: {d}"));
                }
                got.0.extend(own.0);
                got.0.extend(partners.0);
                rows.write_stacks(&mut got);
                let order = |r: &NodeRow| (r.graph_id.clone(), r.node_order);
                got.0.sort_by_key(order);
                let mut want_rows = want.0.clone();
                want_rows.sort_by_key(order);
                let where_ = format!("{}: fuzzy {} part {part}", case.display(), opts.fuzzy);
                assert!(got.0 == want_rows, "{where_}: rows differ");
                assert!(got.1 == want.1, "{where_}: stacks differ");
                assert_eq!(warnings, want_warnings, "{where_}: warnings differ");
                dist.sort_by_key(|(g, o, _)| (*g, *o));
                for (g, want) in want_dist.iter().enumerate() {
                    let got: Vec<_> = dist
                        .iter()
                        .filter(|d| d.0 == g)
                        .map(|d| key(&d.2))
                        .collect();
                    assert_eq!(&got, want, "{where_}: distributed nodes of graph {g}");
                }
            }
        }
    });
    assert!(runs >= 6, "{runs}");
    // Not vacuous: Bench rows were written with their NPU partners.
    assert!(with_partner >= 1000, "{with_partner}");
}

/// A build (no Bench side) goes through the same `PairRows`: in parts of any size, its rows,
/// stacks and distributed nodes are those of `export_graph`.
#[test]
fn build_rows_through_pair_rows_are_the_graphs_rows() {
    use probelens::visdb::export::{GraphRows, PairRows};
    let mut built = 0;
    let runs = each_fixture_matching(|case, nf, _bf, opts| {
        // A build ignores the matching options: once per fixture.
        if opts.fuzzy || opts.layer_mapping.is_some() {
            return;
        }
        let plan = run::plan(nf, None).unwrap();
        for p in &plan.pairs {
            let nd = run::load_rank(nf, &p.npu_dir).unwrap();
            let res = run::run_pair(PairInput::new(nd, None), &opts).unwrap();
            let x = GraphExport::npu(&res, p.step, p.rank);
            let mut want: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
            let want_dist: Vec<_> = export::export_graph(&x, &mut want)
                .iter()
                .map(|d| (d.name.clone(), d.input_data.clone()))
                .collect();
            let rows = PairRows::new(GraphRows::new(&x), None);
            assert_eq!(rows.lens(), vec![want.0.len()]);
            for part in [1, 7, 4096] {
                let mut w = rows.writers();
                type Rows = (Vec<NodeRow>, Vec<StackRow>);
                let (mut got, mut partners): (Rows, Rows) = Default::default();
                let mut dist = Vec::new();
                let len = rows.lens()[0];
                for a in (0..len).step_by(part) {
                    dist.extend(rows.write(
                        0,
                        &mut w,
                        a..(a + part).min(len),
                        &mut got,
                        &mut partners,
                    ));
                }
                // Graph 1 does not exist: nothing is written for it.
                dist.extend(rows.write(1, &mut w, 0..len, &mut got, &mut partners));
                rows.write_stacks(&mut got);
                let where_ = format!("{}: part {part}", case.display());
                assert!(partners.0.is_empty(), "{where_}: rows written as partners");
                got.0.sort_by_key(|r| r.node_order);
                let mut want_rows = want.0.clone();
                want_rows.sort_by_key(|r| r.node_order);
                assert!(got.0 == want_rows, "{where_}: rows differ");
                assert!(got.1 == want.1, "{where_}: stacks differ");
                dist.sort_by_key(|(g, o, _)| (*g, *o));
                let got_dist: Vec<_> = dist
                    .iter()
                    .map(|(g, _, d)| {
                        assert_eq!(*g, 0);
                        (d.name.clone(), d.input_data.clone())
                    })
                    .collect();
                assert_eq!(got_dist, want_dist, "{where_}: distributed nodes");
            }
            built += want.0.len();
        }
    });
    assert!(runs >= 6, "{runs}");
    assert!(built >= 1000, "{built}");
}

/// A matched pair that cannot be compared (a node of debug items) gives the same warning whether
/// the compare reports it (verdicts up front) or the export's read of the deferred pair does
/// (`defer_verdicts`, the CLI writing a `.vis.db`): once, with the same text, and only there.
#[test]
fn deferred_warnings_are_the_compares() {
    use probelens::visdb::export::{GraphRows, PairRows};
    const TENSOR: &str = r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false}"#;
    let dump = format!(
        r#"{{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": {{
 "Module.dbg.debug": {TENSOR},
 "Functional.relu.0.forward": {{"input_args": [{TENSOR}], "input_kwargs": {{}}, "output": [{TENSOR}]}}}}}}"#
    );
    let side = || MemFiles {
        files: BTreeMap::from([
            (
                "construct.json".to_string(),
                br#"{"Module.dbg.debug": null, "Functional.relu.0.forward": null}"#.to_vec(),
            ),
            ("dump.json".to_string(), dump.as_bytes().to_vec()),
            ("stack.json".to_string(), b"{}".to_vec()),
        ]),
        seed: 0,
    };
    let (nf, bf) = (side(), side());
    let plan = run::plan(&nf, Some(&bf)).unwrap();
    let p = &plan.pairs[0];
    let load = |f: &MemFiles, dir: &str| run::load_rank(f, dir).unwrap();
    let bench_dir = p.bench_dir.as_deref().unwrap();
    let not_compared = |said: Vec<String>| -> Vec<String> {
        said.into_iter()
            .filter(|d| d.contains("not compared"))
            .collect()
    };
    let mut opts = RunOptions::default();
    let up_front = run::run_pair(
        PairInput::new(load(&nf, &p.npu_dir), Some(load(&bf, bench_dir))),
        &opts,
    )
    .unwrap();
    let want = not_compared(up_front.diagnostics.iter().map(|d| d.to_string()).collect());
    assert_eq!(want.len(), 1, "{want:?}");
    assert!(
        want[0].contains("Module.dbg.debug: not compared: debug items"),
        "{want:?}"
    );

    opts.defer_verdicts = true;
    let res = run::run_pair(
        PairInput::new(load(&nf, &p.npu_dir), Some(load(&bf, bench_dir))),
        &opts,
    )
    .unwrap();
    let early = not_compared(res.diagnostics.iter().map(|d| d.to_string()).collect());
    assert!(
        early.is_empty(),
        "a deferred pair warned in the compare: {early:?}"
    );
    let xs = [
        GraphExport::npu(&res, p.step, p.rank),
        GraphExport::bench(&res, p.step, p.rank).unwrap(),
    ];
    let rows = PairRows::new(GraphRows::new(&xs[0]), Some(GraphRows::new(&xs[1])));
    let mut w = rows.writers();
    type Rows = (Vec<NodeRow>, Vec<StackRow>);
    let (mut own, mut partners): (Rows, Rows) = Default::default();
    for (g, &len) in rows.lens().iter().enumerate() {
        rows.write(g, &mut w, 0..len, &mut own, &mut partners);
    }
    let got = not_compared(w.warnings().iter().map(|(_, _, d)| d.to_string()).collect());
    assert_eq!(got, want);
}
