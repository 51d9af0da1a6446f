#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| probelens_fuzz::graph_build(data));
