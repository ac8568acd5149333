#!/usr/bin/env python3
"""A pluginregistration v1 plugin on Python's grpcio (gRPC C-core), for the
interoperability test of plugreg's hand-written registration client.

usage: plugin.py SOCKET MODE

MODE is what GetInfo does:
  ok     answer as a CSI plugin "py.example.com" with version 1.0.0
  quiet  the same (for a separate socket)
  error  fail with PERMISSION_DENIED "no info for you"
  huge   answer with a reply of about 70,000 bytes (over the agent's 64 KiB)
  split  answer with a reply of about 40,000 bytes, which HTTP/2 carries in
         several DATA frames of at most 16 KiB

It prints one JSON line per event on stdout: {"event": "ready"} once it
serves, {"event": "getinfo"} per GetInfo, and {"event": "notify",
"registered": BOOL, "error": STR} per NotifyRegistrationStatus. The messages
are encoded by hand (no generated code): PluginInfo is four string fields.
"""
import json
import sys
import threading
from concurrent import futures

import grpc

SERVICE = "/pluginregistration.Registration/"
lock = threading.Lock()


def emit(**kv):
    with lock:
        print(json.dumps(kv), flush=True)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string_field(num, s):
    b = s.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def plugin_info(typ, name, endpoint, versions):
    out = string_field(1, typ) + string_field(2, name) + string_field(3, endpoint)
    for v in versions:
        out += string_field(4, v)
    return out


def read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def registration_status(b):
    """Decodes RegistrationStatus: 1 plugin_registered (bool), 2 error."""
    registered, err, i = False, "", 0
    while i < len(b):
        key, i = read_varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(b, i)
            if num == 1:
                registered = v != 0
        elif wire == 2:
            n, i = read_varint(b, i)
            if num == 2:
                err = b[i:i + n].decode()
            i += n
        else:
            raise ValueError("unexpected wire type %d" % wire)
    return registered, err


def main():
    socket, mode = sys.argv[1], sys.argv[2]

    def get_info(request, context):
        emit(event="getinfo")
        if mode == "error":
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "no info for you")
        if mode == "huge":
            return plugin_info("CSIPlugin", "py-huge.example.com", "", ["v" * 70000])
        if mode == "split":
            return plugin_info("CSIPlugin", "py-split.example.com", "", ["v" * 40000])
        return plugin_info("CSIPlugin", "py.example.com", "", ["1.0.0"])

    def notify(request, context):
        registered, err = registration_status(request)
        emit(event="notify", registered=registered, error=err)
        return b""

    def raw(handler):
        return grpc.unary_unary_rpc_method_handler(
            handler, request_deserializer=lambda b: b, response_serializer=lambda b: b)

    handlers = {"GetInfo": raw(get_info), "NotifyRegistrationStatus": raw(notify)}

    class Registration(grpc.GenericRpcHandler):
        def service(self, details):
            if details.method.startswith(SERVICE):
                return handlers.get(details.method[len(SERVICE):])
            return None

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((Registration(),))
    server.add_insecure_port("unix:" + socket)
    server.start()
    emit(event="ready")
    try:
        sys.stdin.read()  # until the test closes stdin
    finally:
        server.stop(None)


if __name__ == "__main__":
    main()
