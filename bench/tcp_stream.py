#!/usr/bin/env python3
"""One TCP stream's goodput, the reference for a shaped link: `server ADDR
PORT` receives until the peer closes and prints `tcp_stream_gbps <x>`;
`client ADDR PORT MIB` sends MIB MiB. The server listens before it prints
`listening`, so a caller starts the client after that line."""
import socket
import sys
import time

mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "server":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    print("listening", flush=True)
    c, _ = s.accept()
    buf, n, t0 = bytearray(1 << 20), 0, None
    while True:
        k = c.recv_into(buf)
        if not k:
            break
        t0 = t0 or time.perf_counter()
        n += k
    print("tcp_stream_gbps %.3f" % (n * 8 / (time.perf_counter() - t0) / 1e9), flush=True)
else:
    c = socket.create_connection((addr, port))
    data = b"\0" * (4 << 20)
    for _ in range(int(sys.argv[4]) // 4):
        c.sendall(data)
    c.close()
