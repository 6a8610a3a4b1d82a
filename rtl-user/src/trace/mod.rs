pub mod migrate;
pub mod schema;
