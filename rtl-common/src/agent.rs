//! The agent's wire format: what `rtl_agent_publish(data, len)` hands to the collector.
//! (Being written: see rtl-agent/.)
