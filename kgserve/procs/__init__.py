"""The front end's processes: several workers on one port (workers) and the allocator each runs with (malloc)."""
