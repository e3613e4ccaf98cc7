#![no_main]
//! safetensors JSON headers (and the same bytes as a config.json) on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| hypomnesis::fuzzing::safetensors_header(data));
