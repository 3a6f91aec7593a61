"""The schedules: workloads with the faults thrown at them, and what must hold.

In-model schedules keep to the documented assumptions (at most a minority of
nodes faulty at a time, delayed restarts, no stepped clocks, no pause of a
holder past its validity): every safety checker must pass. Out-of-model
schedules break one assumption on purpose: the named checkers must FAIL,
which shows they can see the violation.
"""

from __future__ import annotations

from .nemesis import Fault
from .run import Schedule

__all__ = ["IN_MODEL", "MUTANT_SCHEDULES", "OUT_OF_MODEL", "SMOKE", "by_name"]

IN_MODEL: tuple[Schedule, ...] = (
    Schedule("healthy-counter", "counter", duration=5.0),
    Schedule(
        "minority-process-faults",
        "counter",
        duration=9.0,
        faults=(
            Fault(at=1.0, kind="pause-node", duration=1.5, nodes=(0,)),
            # Back empty after longer than the ttl: a delayed restart.
            Fault(at=3.0, kind="kill-node", duration=2.0, nodes=(1,)),
            Fault(at=5.5, kind="pause-node", duration=1.0, nodes=(3, 4)),
        ),
    ),
    Schedule(
        "network-faults",
        "counter",
        duration=9.0,
        faults=(
            Fault(
                at=0.5,
                kind="delay",
                duration=2.0,
                nodes=(0, 1),
                args={"seconds": 0.03, "jitter": 0.03},
            ),
            Fault(at=3.0, kind="blackhole", duration=1.5, nodes=(2,)),
            Fault(at=5.0, kind="reset", duration=0.1, nodes=(0, 1, 2, 3, 4)),
            Fault(at=6.0, kind="drop-replies", duration=1.0, nodes=(4,)),
            Fault(at=7.5, kind="refuse", duration=1.0, nodes=(3,)),
        ),
    ),
    Schedule(
        "partitions",
        "counter",
        duration=8.0,
        faults=(
            # w0 loses a majority (it can hold nothing), w1 a minority.
            Fault(at=1.0, kind="partition", duration=2.5, nodes=(0, 1, 2), workers=(0,)),
            Fault(at=1.5, kind="partition", duration=2.0, nodes=(3, 4), workers=(1,)),
            # A bridge: w2 sees only nodes 2, 3, 4 while w0 sees only 0, 1, 2.
            Fault(at=5.0, kind="partition", duration=2.0, nodes=(3, 4), workers=(0,)),
            Fault(at=5.0, kind="partition", duration=2.0, nodes=(0, 1), workers=(2,)),
        ),
    ),
    Schedule(
        "fenced-paused-holders",
        "fenced",
        duration=9.0,
        ttl=0.5,
        gap=0.03,
        # Pauses past the lease are outside the model, but with fencing the
        # resource must lose nothing and take no stale write.
        faults=tuple(Fault(at=1.0 + 1.6 * i, kind="pause-holder", duration=1.0) for i in range(4)),
    ),
    Schedule(
        "rwlock-node-faults",
        "rw",
        duration=8.0,
        tasks=3,
        hold=(0.0, 0.08),
        faults=(
            Fault(at=2.0, kind="pause-node", duration=1.5, nodes=(1,)),
            Fault(
                at=4.5,
                kind="delay",
                duration=2.0,
                nodes=(2, 3),
                args={"seconds": 0.02, "jitter": 0.02},
            ),
        ),
    ),
    Schedule(
        "renewed-holds-lose-majority",
        "renew",
        duration=9.0,
        ttl=1.0,
        hold=(0.5, 2.5),
        faults=(Fault(at=3.0, kind="pause-node", duration=2.0, nodes=(0, 1, 2)),),
    ),
    Schedule(
        "restart-empty-at-once",
        "counter",
        duration=8.0,
        ttl=2.0,
        hold=(0.0, 2.0),
        # Outside the paper's model - but the library quarantines a node whose
        # run_id changed, so nothing may go wrong.
        faults=tuple(
            Fault(at=1.5 + 2.0 * i, kind="restart-node-at-once", nodes=(i,)) for i in range(3)
        ),
    ),
)

# Nodes that persist every write (AOF, fsync always / every second), killed
# and restarted at once: the keys come back from disk (and the restart
# quarantine holds their votes meanwhile).
IN_MODEL += tuple(
    Schedule(
        f"restart-at-once-aof-{fsync}",
        "counter",
        duration=8.0,
        ttl=2.0,
        hold=(0.0, 2.0),
        node_args=("--appendonly", "yes", "--appendfsync", fsync),
        faults=tuple(
            Fault(at=1.5 + 2.0 * i, kind="kill-node", duration=0.0, nodes=(i, i + 1))
            for i in range(3)
        ),
    )
    for fsync in ("always", "everysec")
)

IN_MODEL += (
    # The hosts' wall clocks step back and forward by a minute: nothing the
    # lock promises may change (it measures time on the monotonic clock).
    Schedule(
        "client-wall-clock-jumps",
        "counter",
        duration=7.0,
        wall_clock_jumps=((1.0, -60.0), (2.5, 120.0), (4.0, -90.0), (5.5, 3600.0)),
    ),
    # One uncontended client; node 0 slowed by 20 ms each way for a while:
    # acquire latency should barely move (the decision does not wait for it).
    Schedule(
        "slow-node-latency",
        "counter",
        duration=8.0,
        workers=1,
        tasks=1,
        hold=(0.0, 0.001),
        faults=(Fault(at=4.0, kind="delay", duration=4.0, nodes=(0,), args={"seconds": 0.02}),),
    ),
)

OUT_OF_MODEL: tuple[Schedule, ...] = (
    Schedule(
        "paused-holders-unfenced",
        "counter",
        duration=9.0,
        ttl=0.5,
        gap=0.03,
        in_model=False,
        faults=tuple(Fault(at=1.0 + 1.6 * i, kind="pause-holder", duration=1.0) for i in range(4)),
        expect_violations=("no_lost_updates",),
    ),
    Schedule(
        "blocked-loop-renewed-holder",
        "renew",
        duration=8.0,
        workers=2,
        ttl=0.5,
        hold=(0.5, 1.5),
        in_model=False,
        # Fair: unfair hand-overs let one worker's tasks pass the lock among
        # themselves for the whole run, and the stalling worker never held it
        # (1 run of 16 in a campaign). In arrival order it gets its turn; the
        # other worker's waiter then takes over during the stall once the
        # key expired (ttl) and the stalled waiter's queue entry lapsed (1 s).
        fair=True,
        block_loop={0: ((2.0, 2.0), (5.0, 2.0))},
        block_when_holding=True,
        expect_violations=("mutual_exclusion",),
    ),
    Schedule(
        "majority-clock-jump",
        "counter",
        duration=8.0,
        ttl=3.0,
        hold=(0.5, 3.0),
        in_model=False,
        faults=tuple(
            Fault(at=1.0 + 1.5 * i, kind="expiry-jump", nodes=(0, 1, 2)) for i in range(4)
        ),
        expect_violations=("mutual_exclusion",),
    ),
)

# Where each planted bug should show: a schedule that exercises the code it breaks.
# Event-loop stalls while an acquire is in flight (a pause before acquire
# returns: inside the model): the attempt took that long, and its validity
# must say so.
_STALLED = Schedule(
    "stalls-in-acquire",
    "counter",
    duration=7.0,
    ttl=1.0,
    hold=(0.3, 5.0),
    acquire_timeout=3.0,
    stall_in_acquire=(0.3, 0.4),
)
_CONTENTION = Schedule("contention", "counter", duration=5.0, tasks=3, hold=(0.0, 0.01))
_LATE = Schedule("late-releases", "counter", duration=6.0, ttl=0.5, overrun=0.3)
_JUMPS = Schedule(
    "renewed-holds-majority-jump",
    "renew",
    duration=9.0,
    workers=2,
    tasks=1,
    ttl=1.0,
    hold=(3.0, 5.0),
    in_model=False,
    # Waiters retry fast: after the jump, the other worker takes the keys
    # before the holder's next renewal finds them gone.
    redlock={"retry_delay": 0.02, "retry_jitter": 0.02},
    faults=tuple(Fault(at=1.5 + 2.0 * i, kind="expiry-jump", nodes=(0, 1, 2)) for i in range(3)),
)
MUTANT_SCHEDULES: dict[str, Schedule] = {
    "quorum-n2": _CONTENTION,
    "validity-ignores-elapsed": _STALLED,
    "no-drift-margin": _STALLED,
    "release-with-del": _LATE,
    "unconditional-pexpire": _JUMPS,
    "no-rollback": Schedule(
        "contention-long-ttl", "counter", duration=5.0, tasks=3, ttl=10.0, hold=(0.0, 0.01)
    ),
    "wall-clock-validity": Schedule(
        "work-while-held",
        "counter",
        duration=7.0,
        ttl=1.0,
        hold=(0.5, 3.0),
        gap=0.01,
        acquire_timeout=3.0,
        work_while_held=True,
    ),
    "extend-recreates-key": _JUMPS,
    "fence-before-write-back": Schedule(
        "fencing-burst", "fenced", duration=6.0, workers=4, tasks=3, hold=(0.0, 0.005)
    ),
    "reader-ignores-waiting-writer": Schedule(
        "reader-stream",
        "rw",
        duration=6.0,
        tasks=5,
        writer_tasks=1,
        hold=(0.15, 0.4),
        acquire_timeout=2.5,
    ),
}

# The every-CI tier: a few in-model schedules, the out-of-model detections,
# and the mutants (each on its schedule).
SMOKE: tuple[str, ...] = (
    "healthy-counter",
    "minority-process-faults",
    "network-faults",
    "partitions",
    "fenced-paused-holders",
    "rwlock-node-faults",
    "renewed-holds-lose-majority",
    "restart-empty-at-once",
    "restart-at-once-aof-always",
    "client-wall-clock-jumps",
)


def by_name(name: str) -> Schedule:
    for schedule in (*IN_MODEL, *OUT_OF_MODEL):
        if schedule.name == name:
            return schedule
    raise KeyError(name)
