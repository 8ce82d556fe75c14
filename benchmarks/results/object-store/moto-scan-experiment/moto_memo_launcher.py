"""Experiment only: the bench's launcher plus moto's list_of_moto_modules memoized (it lists moto's
package folder and stats every entry on each request, to map the Host to a backend)."""
import functools, os, sys
import moto.backends as b
if os.environ.get("MOTO_MEMO") == "1":
    cached = tuple(b.list_of_moto_modules())
    b.list_of_moto_modules = lambda: cached
sys.argv[0] = "moto"
from dvengine.bench.moto_server import main
main()
