"""Issue 33 and 36's dispatch measurements: a lone client with the thread reserve against without it
(`benchmarks.dispatch.lone`), whole-game reviews beside other clients (`benchmarks.dispatch.reviews`), one query each
from a crowd of client identities (`benchmarks.dispatch.crowd`). `rig` starts kgserve for them."""
