#![no_main]
//! DRM fdinfo parser, region model and utilization maths on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| hypomnesis::fuzzing::fdinfo(data));
