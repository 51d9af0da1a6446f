//! The `probelens` command line: a drop-in for `msprobe graph_visualize`, writing the same
//! `.vis.db`. All IO (files, clock, SQLite, terminal) lives here; the library does none.
//!
//! Threads (the core starts none; it calls the [`probelens::Join`] the CLI passes, two scoped
//! threads): units (pairs, merged steps) run `-j` at a time, each on the threads below, within a
//! memory budget (`jobs`); in a unit the two sides of a pair are parsed on two threads, each going on with its side's
//! `run::Prepared` work as soon as its dump is parsed (`graph_visualize::run_loaded_pair`); the
//! rows of the NPU and Bench graphs are formatted on two threads that take parts of either graph in
//! turn, each packing its rows into the file's pages itself under the writer's lock while they are
//! in its core's cache (`db::DbSink`); the indexes are sorted and written on two threads at the
//! end. SQLite itself (`rusqlite`) only rebuilds the indexes past the writer's key budget and
//! applies the distributed post-analysis in the written file.

mod alloc;
mod args;
mod db;
mod diagnose;
mod fs;
mod graph_visualize;
mod jobs;
mod progress;
mod shard;
mod suggest;

use crate::alloc::tune_allocator;
use crate::args::{parse_args, USAGE};
use crate::diagnose::diagnose_main;
use crate::graph_visualize::graph_visualize;
use crate::suggest::suggest_main;

fn main() {
    tune_allocator();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = match argv.first().map(String::as_str) {
        Some("graph_visualize") => match parse_args(&argv[1..]) {
            Ok(a) => match graph_visualize(&a) {
                Ok(p) => {
                    if !p.as_os_str().is_empty() {
                        println!("probelens: wrote {}", p.display());
                    }
                    0
                }
                Err(e) => {
                    eprintln!("probelens: error: {e}");
                    1
                }
            },
            Err(msg) if msg.is_empty() => {
                println!("{USAGE}");
                0
            }
            Err(msg) => {
                eprintln!("{USAGE}\nprobelens graph_visualize: error: {msg}");
                2
            }
        },
        Some("suggest") => suggest_main(&argv[1..]),
        Some("diagnose") => diagnose_main(&argv[1..]),
        Some("merge-db") => crate::shard::merge_db_main(&argv[1..]),
        Some("version") | Some("--version") | Some("-V") => {
            println!("probelens {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("-h") | Some("--help") | Some("help") | None => {
            println!("{USAGE}");
            0
        }
        Some(other) => {
            eprintln!("probelens: unknown command '{other}'\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}
