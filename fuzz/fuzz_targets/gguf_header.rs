#![no_main]
//! GGUF v2/v3 headers (metadata and tensor infos) and the architecture from them, on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| hypomnesis::fuzzing::gguf_header(data));
