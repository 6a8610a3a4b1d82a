//! Reading traces: summary, Perfetto conversion, merge (see docs/reading-traces.md).
