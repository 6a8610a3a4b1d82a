pub mod read;
pub mod trace;
