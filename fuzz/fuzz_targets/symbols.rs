//! ELF symbol resolver: any bytes as a `--lib` file. Must return Ok or Err, never panic,
//! never read out of bounds; every offset it returns lies inside the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtl_fuzz::symbols::Symbols;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Symbols::parse(data) {
        for name in s.names_with_prefix("") {
            let off = s.offset(name).expect("listed names have offsets");
            assert!((off as usize) < data.len(), "offset {off} of {name} past the end");
        }
    }
});
