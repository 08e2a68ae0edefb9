//! Opening data connections: everything lives in `ferry_io::transport`
//! now (one port allocator, one buffer-size rule, one profiler
//! registration for the server and the client); this module keeps the
//! server's names for it.

pub use ferry_io::transport::{accept_from, PortAllocator};
