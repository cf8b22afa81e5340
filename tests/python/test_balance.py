"""gpubridge.balance without ranks: propose_batch_sizes against shares
computed here (exact cases, and a brute-force least-squares allocation for
random times), min_size, ties, refused inputs; time_step with a synthetic
clock (no sleeps). The collective balance_batch runs in test_weighted_avg.py."""
import itertools
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbtest  # noqa: E402

gbtest.setup_path()
import gpubridge  # noqa: E402
from gpubridge import balance  # noqa: E402

passed, problems = 0, []


def expect(name, got, want):
    global passed
    if got == want:
        passed += 1
    else:
        problems.append("%s: got %r, expected %r" % (name, got, want))


def refused(name, fn, words):
    global passed
    try:
        fn()
    except gpubridge.Error as e:
        if all(w in str(e) for w in words):
            passed += 1
        else:
            problems.append("%s: error %r lacks %s" % (name, str(e), words))
        return
    problems.append("%s: accepted" % name)


# Per-sample costs 1, 2, 4 s: speeds 1 : 1/2 : 1/4 of 70 samples are 40, 20, 10 exactly.
expect("exact shares", balance.propose_batch_sizes([8, 16, 32], [8, 8, 8], 70), [40, 20, 10])
# Speeds 8, 8, 4 of 32: shares 12.8, 12.8, 6.4 -> floors 12, 12, 6, two left:
# rank 2 (.4) loses to ranks 0 and 1 (.8, tie broken by rank).
expect("largest remainders", balance.propose_batch_sizes([1, 1, 2], [8, 8, 8], 32), [13, 13, 6])
# Equal speeds, 10 over 3: 3.33 each, the one left to the lowest rank.
expect("tie to the lower rank", balance.propose_batch_sizes([2.0, 2.0, 2.0], [5, 5, 5], 10), [4, 3, 3])
# The times of the old sizes count: rank 1 took twice rank 0's time for twice its batch: same speed.
expect("speed is batch over time", balance.propose_batch_sizes([1.0, 2.0], [4, 8], 12), [6, 6])
# A rank 1000 times slower: share 0.02 < 1, so it gets 1 and rank 0 the other 19.
expect("min_size 1", balance.propose_batch_sizes([1, 1000], [10, 10], 20), [19, 1])
expect("min_size 0", balance.propose_batch_sizes([1, 1000], [10, 10], 20, min_size=0), [20, 0])
# Two slow ranks raised to 3, the rest shared 3 : 1 by the fast two.
expect("min_size, proportional rest", balance.propose_batch_sizes([1, 3, 100, 100], [6, 6, 6, 6], 30, min_size=3),
       [18, 6, 3, 3])
expect("one rank", balance.propose_batch_sizes([0.5], [7], 9), [9])

# Random float times: the allocation with each size within 1 of its share that is
# nearest to the shares (least squares), found by trying every composition.
rng = random.Random(5)
for case in range(40):
    n, g = rng.choice([(2, 17), (3, 20), (4, 16)])
    times = [rng.uniform(0.01, 0.1) for _ in range(n)]
    sizes = [rng.randint(2, 9) for _ in range(n)]
    speeds = [b / t for b, t in zip(sizes, times)]
    shares = [g * s / sum(speeds) for s in speeds]
    best = min((c for c in itertools.product(range(g + 1), repeat=n) if sum(c) == g),
               key=lambda c: sum((x - q) ** 2 for x, q in zip(c, shares)))
    got = balance.propose_batch_sizes(times, sizes, g, min_size=0)
    expect("random case %d (times %s)" % (case, times), got, list(best))
    expect("random case %d again" % case, balance.propose_batch_sizes(list(times), list(sizes), g, min_size=0), got)

refused("lengths", lambda: balance.propose_batch_sizes([1, 2], [1], 4), ["2 step times and 1 batch sizes"])
refused("no ranks", lambda: balance.propose_batch_sizes([], [], 4), ["0 step times"])
refused("small global batch", lambda: balance.propose_batch_sizes([1, 1, 1], [1, 1, 1], 5, min_size=2),
        ["global batch of 5", "3 ranks 2 sample"])
refused("zero time", lambda: balance.propose_batch_sizes([1, 0], [1, 1], 4), ["step time of rank 1", "> 0"])
refused("NaN batch", lambda: balance.propose_batch_sizes([1, 1], [float("nan"), 1], 4), ["batch size of rank 0"])
refused("fractional global batch", lambda: balance.propose_batch_sizes([1], [1], 4.5), ["whole numbers"])
refused("steps 0", lambda: balance.time_step(lambda: None, steps=0), ["steps 0"])

# time_step: a clock that the step itself advances by 1, 5, 2, 9 s after one
# untimed warm-up step (which advances it by 100): median of 4 = (2 + 5) / 2.
now = [0.0]
advances = iter([100.0, 1.0, 5.0, 2.0, 9.0])
synced = []
got = balance.time_step(lambda: now.__setitem__(0, now[0] + next(advances)), steps=4, warmup=1,
                        clock=lambda: now[0], sync=lambda: synced.append(1))
expect("time_step median", got, 3.5)
expect("time_step syncs around each timed step", len(synced), 8)
expect("time_step odd count", balance.time_step(lambda: now.__setitem__(0, now[0] + 1.0), steps=3, warmup=0,
                                                clock=lambda: now[0], sync=lambda: None), 1.0)

if problems:
    gbtest.fail("; ".join(problems))
print("%d passed, 0 failed" % passed)
