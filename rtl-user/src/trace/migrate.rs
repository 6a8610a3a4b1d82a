//! Migration of older trace files to the current schema.
