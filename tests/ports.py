"""A TCP port for a test job's rank 0, shared by tests/mp and tests/python."""
import random
import socket


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1, drawn below Linux's
    ephemeral range (32768 and up): a port the kernel handed out for bind(0)
    goes back to that pool, where the next listener or outgoing connection of
    a test running alongside can take it before our rank 0 binds it."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(20000, 32768)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port in 20000-32767 on 127.0.0.1 after 200 tries")
