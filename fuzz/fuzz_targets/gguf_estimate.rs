#![no_main]
//! A GGUF header assembled into a model as `hmn fits` does, then estimated and judged under
//! every runtime at default and extreme settings: no overflow for any header the parser accepts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| hypomnesis::fuzzing::gguf_estimate(data));
