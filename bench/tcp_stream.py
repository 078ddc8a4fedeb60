#!/usr/bin/env python3
"""One TCP stream of BYTES through blocking sockets, for bench/link_cost.sh.

    tcp_stream.py recv ADDRESS PORT BYTES CHUNK            # listen, read BYTES, answer one byte
    tcp_stream.py send ADDRESS PORT BYTES CHUNK START_AT   # connect, wait for START_AT, write BYTES

Blocking calls, so that the CPU a transfer takes is the kernel's copying and TCP/IP work and
nothing else: no process spins on a socket the way MPI's progress loop does. The sender
connects, waits until the monotonic clock (system-wide, the same in every network
namespace) reads START_AT, so that two senders start together and after every interpreter
has started, then writes. It prints one JSON line: the monotonic times of its first write
and of the receiver's answer, and the machine's CPU ticks (/proc/stat's "cpu" line) at both.
Standard library only.
"""
import json
import socket
import sys
import time


def cpu_ticks():
    with open("/proc/stat") as stat:
        return [int(v) for v in stat.readline().split()[1:]]


def receive(address, port, total, view):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, port))
    server.listen(1)
    connection, _ = server.accept()
    received = 0
    while received < total:
        n = connection.recv_into(view, min(len(view), total - received))
        if n == 0:
            sys.exit("tcp_stream.py: the sender closed after %d of %d bytes" % (received, total))
        received += n
    connection.sendall(b"k")


def send(address, port, total, view, start_at):
    for _ in range(100):  # the receiver may still be starting: 10 s at most
        try:
            connection = socket.create_connection((address, port), timeout=10)
            break
        except ConnectionRefusedError:
            time.sleep(0.1)
    else:
        sys.exit("tcp_stream.py: nobody listens on %s:%d" % (address, port))
    connection.settimeout(None)  # blocking from here on
    time.sleep(max(0.0, start_at - time.monotonic()))
    ticks_start, start = cpu_ticks(), time.monotonic()
    sent = 0
    while sent < total:
        n = min(len(view), total - sent)
        connection.sendall(view[:n])
        sent += n
    if connection.recv(1) != b"k":
        sys.exit("tcp_stream.py: the receiver did not answer")
    end, ticks_end = time.monotonic(), cpu_ticks()
    print(json.dumps({"start": start, "end": end, "ticks_start": ticks_start, "ticks_end": ticks_end}))


def main():
    role, address, port, total, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    view = memoryview(bytearray(chunk))
    if role == "recv":
        receive(address, port, total, view)
    else:
        send(address, port, total, view, float(sys.argv[6]))


if __name__ == "__main__":
    main()
