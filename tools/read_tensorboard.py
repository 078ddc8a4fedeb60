#!/usr/bin/python3
"""Prints the scalars of a TensorBoard event file, one line per scalar: `step tag value`.

A check of record/tensorboard_log.cpp by a second, independent reader: the protobuf library
decodes the events (Debian's python3-protobuf; no TensorFlow, no protoc: the three messages
are declared below as a FileDescriptorProto, with the field numbers and types of TensorFlow's
event.proto and summary.proto), and both CRC-32Cs of every TFRecord are checked.

    /usr/bin/python3 tools/read_tensorboard.py DIR/events.out.tfevents.*

Exits 1, naming the record, on a wrong CRC or a truncated file. Not part of CI.
"""
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit: reflected polynomial 0x82F63B78."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    """tensorflow.Event, with the fields mpiddp writes, built at run time."""
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="mpiddp_event.proto", package="tensorflow", syntax="proto3")

    def message(name, fields):
        m = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            f = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                f.type_name = type_name

    optional, repeated = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("Value", [("tag", 1, F.TYPE_STRING, optional, None),
                      ("simple_value", 2, F.TYPE_FLOAT, optional, None)])
    message("Summary", [("value", 1, F.TYPE_MESSAGE, repeated, ".tensorflow.Value")])
    message("Event", [("wall_time", 1, F.TYPE_DOUBLE, optional, None),
                      ("step", 2, F.TYPE_INT64, optional, None),
                      ("file_version", 3, F.TYPE_STRING, optional, None),
                      ("summary", 5, F.TYPE_MESSAGE, optional, ".tensorflow.Summary")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4.22 and later
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def records(data):
    """The data of each TFRecord, after checking both of its CRCs."""
    at, index = 0, 0
    while at < len(data):
        where = f"record {index} at byte {at}"
        if len(data) - at < 12:
            raise ValueError(f"{where}: truncated length")
        length_bytes = data[at:at + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked_crc32c(length_bytes):
            raise ValueError(f"{where}: wrong length CRC")
        at += 12
        if len(data) - at < length + 4:
            raise ValueError(f"{where}: truncated data")
        payload = data[at:at + length]
        (data_crc,) = struct.unpack("<I", data[at + length:at + length + 4])
        if data_crc != masked_crc32c(payload):
            raise ValueError(f"{where}: wrong data CRC")
        yield payload
        at += length + 4
        index += 1


def main(paths):
    if not paths:
        sys.exit(__doc__)
    Event = event_class()
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        try:
            for payload in records(data):
                event = Event.FromString(payload)
                if event.file_version:
                    print(f"# {path}: {event.file_version}, wall_time {event.wall_time:.6f}")
                for value in event.summary.value:
                    print(f"{event.step} {value.tag} {value.simple_value!r}")
        except ValueError as error:
            sys.exit(f"{path}: {error}")


if __name__ == "__main__":
    main(sys.argv[1:])
