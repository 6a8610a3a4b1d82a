//! The trace file (the `rtl-trace` crate): schema, writer, and migration with this collector's
//! API table for files that predate `rtl_api_meaning`.

pub use rtl_trace::{schema, writer};

/// [`rtl_trace::migrate`], with [`migrate::migrate`] given this collector's API table.
pub mod migrate {
    pub use rtl_trace::migrate::*;

    /// [`rtl_trace::migrate::migrate`] with [`crate::probe::apis::meaning_of`].
    pub fn migrate(conn: &rusqlite::Connection) -> anyhow::Result<MigrateReport> {
        rtl_trace::migrate::migrate(conn, crate::probe::apis::meaning_of)
    }
}
