"""A hostile S3 endpoint for scripts/attacks.sh: serves the files of DIR as s3://hostile/ds/<name> (HEAD bucket,
HEAD and GET object, no signature checked) and misbehaves on GETs of .arrow objects as MODE says:

  too-much  a Content-Length of 1 TiB and zeros until the client hangs up (at most 4 GiB)
  stall     the first 1000 bytes, then nothing until the client hangs up

Usage: fake_s3.py PORTFILE DIR MODE   (writes the port it listens on to PORTFILE, then serves forever)
"""
import http.server
import os
import sys
import time

portfile, root, mode = sys.argv[1:4]
sent = 0


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _obj(self):
        parts = self.path.split("?")[0].lstrip("/").split("/", 2)
        if len(parts) < 3 or parts[2] == "":
            return None
        return os.path.join(root, os.path.basename(parts[2]))

    def _head(self, size):
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
        self.send_header("Last-Modified", "Tue, 14 Nov 2023 22:13:20 GMT")
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()

    def do_HEAD(self):
        p = self._obj()
        if p is None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif not os.path.isfile(p):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._head(os.path.getsize(p))

    def do_GET(self):
        global sent
        p = self._obj()
        if p is None or not os.path.isfile(p):
            body = b"<Error><Code>NoSuchKey</Code><Message>no</Message></Error>"
            self.send_response(404)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        data = open(p, "rb").read()
        if not p.endswith(".arrow"):
            self._head(len(data))
            self.wfile.write(data)
            return
        try:
            if mode == "too-much":
                self._head(1 << 40)
                chunk = bytes(1 << 20)
                self.wfile.write(data)
                for _ in range(4096):
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    with open(portfile + ".sent", "w") as f:
                        f.write(str(sent))
            else:
                self._head(len(data))
                self.wfile.write(data[:1000])
                self.wfile.flush()
                time.sleep(3600)
        except (BrokenPipeError, ConnectionResetError):
            pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile, "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
