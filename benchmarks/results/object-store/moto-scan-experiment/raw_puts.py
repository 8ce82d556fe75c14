import sys, os, time, socket, statistics, uuid
import obstore
from dvengine.bench.object_store import moto_process, _create_bucket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
ep = f"http://127.0.0.1:{port}"
cfg = {"aws_endpoint": ep, "aws_access_key_id": "b", "aws_secret_access_key": "b", "aws_region": "us-east-1", "aws_allow_http": "true"}
def busy(ms):
    t = time.perf_counter()
    x = 0
    while time.perf_counter() - t < ms / 1000:
        x += 1
import subprocess
proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'moto_memo_launcher.py'), '-H', '127.0.0.1', '-p', str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(3)
if True:
    _create_bucket(ep, "bench")
    if os.environ.get('BUILD'):
        from dvengine.bench.object_store import build_base
        build_base('s3://bench/t', 1000000, 10, {'AWS_ENDPOINT_URL': ep, 'AWS_ACCESS_KEY_ID': 'b', 'AWS_SECRET_ACCESS_KEY': 'b', 'AWS_REGION': 'us-east-1', 'AWS_ALLOW_HTTP': 'true'})
    st = obstore.store.S3Store("bench", config=cfg)
    body = os.urandom(3000)
    for gap in (0, 3, 0, 3):
        times = []
        for i in range(150):
            if gap == "sleep3":
                time.sleep(0.003)
            elif gap:
                busy(gap)
            t = time.perf_counter()
            obstore.put(st, f"t/_delta_log/{uuid.uuid4().hex}.json", body, mode="create")
            times.append((time.perf_counter() - t) * 1000)
        times = sorted(times[10:])
        print(f"gap {gap}: p50 {statistics.median(times):.2f} p10 {times[len(times)//10]:.2f} p90 {times[9*len(times)//10]:.2f}")
proc.terminate()
