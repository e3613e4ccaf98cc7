#![no_main]
//! nvidia-smi CSV and procfs memory parsers on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| hypomnesis::fuzzing::text_parsers(data));
