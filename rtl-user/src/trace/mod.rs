//! The trace file: schema, writer, migration of older files.
pub mod migrate;
pub mod schema;
pub mod writer;
