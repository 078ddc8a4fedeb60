#!/usr/bin/env python3
"""One TCP stream of BYTES through blocking sockets, for bench/link_cost.sh.

    tcp_stream.py recv ADDRESS PORT BYTES CHUNK   # listen on ADDRESS:PORT, read BYTES, answer one byte
    tcp_stream.py send ADDRESS PORT BYTES CHUNK   # connect, write BYTES in CHUNK-byte writes

Blocking calls, so that the CPU a transfer takes is the kernel's copying and TCP/IP work and
nothing else: no process spins on a socket the way MPI's progress loop does. The sender
prints the seconds from its first write to the receiver's answer. Standard library only.
"""
import socket
import sys
import time


def main():
    role, address, port, total, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    view = memoryview(bytearray(chunk))
    if role == "recv":
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((address, port))
        server.listen(1)
        connection, _ = server.accept()
        received = 0
        while received < total:
            n = connection.recv_into(view, min(chunk, total - received))
            if n == 0:
                sys.exit("tcp_stream.py: the sender closed after %d of %d bytes" % (received, total))
            received += n
        connection.sendall(b"k")
        return
    for attempt in range(100):  # the receiver may still be starting: 10 s at most
        try:
            connection = socket.create_connection((address, port), timeout=60)
            break
        except ConnectionRefusedError:
            time.sleep(0.1)
    else:
        sys.exit("tcp_stream.py: nobody listens on %s:%d" % (address, port))
    start = time.monotonic()
    sent = 0
    while sent < total:
        n = min(chunk, total - sent)
        connection.sendall(view[:n])
        sent += n
    connection.recv(1)
    print("%.6f" % (time.monotonic() - start))


if __name__ == "__main__":
    main()
