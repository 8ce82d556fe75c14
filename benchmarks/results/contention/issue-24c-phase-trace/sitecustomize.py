"""Phase tracer for contention writers (only with DV_TRACE=<dir> and --worker in argv)."""
import os
import sys

if os.environ.get("DV_TRACE") and "--worker" in sys.argv:
    import atexit
    import contextlib
    import functools
    import json
    import threading
    import time
    T = {}  # (phase, in_turn) -> [calls, cpu, wall]
    state = {"turn": False, "go": False}
    def add(name, cpu, wall):
        k = f"{name}|{'in' if state['turn'] else 'out'}"
        e = T.setdefault(k, [0, 0.0, 0.0])
        e[0] += 1
        e[1] += cpu
        e[2] += wall
    def wrap(obj, attr, name):
        f = getattr(obj, attr)
        @functools.wraps(f)
        def w(*a, **k):
            if threading.current_thread() is not threading.main_thread():
                return f(*a, **k)
            turn0 = state["turn"]
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                st = state["turn"]
                state["turn"] = turn0  # attribute the call to where it started (in or out of the turn)
                add(name, time.thread_time() - c0, time.perf_counter() - w0)
                state["turn"] = st
        setattr(obj, attr, w)
    def install():
        import dvengine.commands.context as ctxm
        import dvengine.commit.transaction as tx
        import dvengine.engine.local.executor as lex
        from dvengine.api import dml, table
        from dvengine.storage import local
        orig_turn = tx.commit_turn
        @contextlib.contextmanager
        def turn(log, *a, **k):
            c0, w0 = time.thread_time(), time.perf_counter()
            with orig_turn(log, *a, **k) as held:
                add("turn.wait", time.thread_time() - c0, time.perf_counter() - w0)
                state["turn"] = True
                c1, w1 = time.thread_time(), time.perf_counter()
                try:
                    yield held
                finally:
                    add("turn.hold", time.thread_time() - c1, time.perf_counter() - w1)
                    state["turn"] = False
        tx.commit_turn = turn
        wrap(tx, "turn_taken", "turn_taken")
        for m in ["commit", "_catch_up", "_serialize", "_run_post_commit_hooks", "_check_winners_from", "_write_rebased", "_resolve_row_level", "_commit_staged_in_turn"]:
            wrap(tx.Transaction, m, "txn." + m)
        wrap(tx, "_read_commit_if_exists", "read_winner")
        for m in ["stage_commit", "link_staged", "sync_dir", "discard_staged", "exists", "list_dir", "list_dir_after"]:
            if not hasattr(local.LocalStorage, m):
                continue
            wrap(local.LocalStorage, m, "fs." + m)
        wrap(dml, "load_snapshot", "load_snapshot")
        import dvengine.commands.replan as rp
        wrap(rp, "blind_snapshot", "blind_snapshot")
        wrap(dml, "open_dml", "open_dml")
        wrap(ctxm, "plan_candidates", "plan_candidates")
        wrap(lex.LocalExecutor, "retire_rows", "retire_rows")
        wrap(lex.LocalExecutor, "write_tables", "write_tables")
        wrap(table.DeltaTable, "deleteMetrics", "DELETE")
        wrap(table.DeltaTable, "updateMetrics", "UPDATE")
        for m in ("deleteMetrics", "updateMetrics"):
            f = getattr(table.DeltaTable, m)
            def reset(*a, _f=f, **k):
                state["n"] = state.get("n", 0) + 1
                if state["n"] == 3:
                    T.clear()
                    import resource
                    ru = resource.getrusage(resource.RUSAGE_SELF)
                    state["ru0"] = (ru.ru_nvcsw, ru.ru_nivcsw, state["n"])
                return _f(*a, **k)
            setattr(table.DeltaTable, m, reset)
        wrap(tx, "parse_actions", "parse_actions(tx)")
        wrap(tx, "apply_dv_update", "apply_dv_update")
        wrap(tx, "write_rebased", "write_rebased")
        wrap(tx, "check_conflicts", "check_conflicts")
        wrap(tx, "file_rows", "file_rows")
        wrap(tx, "note_own_commit", "note_own_commit")
        wrap(tx.WinningCommit, "from_actions", "winning_commit")
    install()
    def dump():
        import resource
        ru = resource.getrusage(resource.RUSAGE_SELF)
        if "ru0" in state:
            T["csw|vol"] = [state["n"] - state["ru0"][2], ru.ru_nvcsw - state["ru0"][0], 0]
            T["csw|invol"] = [state["n"] - state["ru0"][2], ru.ru_nivcsw - state["ru0"][1], 0]
        out = sys.argv[sys.argv.index("--worker") + 6]
        with open(os.path.join(os.environ["DV_TRACE"], os.path.basename(out) + f"-{sys.argv[sys.argv.index('--worker')+3]}.trace.json"), "w") as f:
            json.dump(T, f)
    atexit.register(dump)
