"""Python's ftplib against `ferry serve`: every command the server lists,
its error paths, and the reply codes a standard client relies on.

Run by tests/peers_ftplib.rs with the server's address and credentials in
the environment; it can also be run by hand:
    FERRY_HOST=127.0.0.1 FERRY_PORT=2811 FERRY_USER=alice FERRY_PASS=... \
    FERRY_RO_USER=bob FERRY_RO_PASS=... FERRY_ROOT=/srv/dir python3 ftplib_suite.py
"""

import ftplib
import hashlib
import io
import os
import socket
import unittest

HOST = os.environ["FERRY_HOST"]
PORT = int(os.environ["FERRY_PORT"])
USER = os.environ["FERRY_USER"]
PASS = os.environ["FERRY_PASS"]
RO_USER = os.environ["FERRY_RO_USER"]
RO_PASS = os.environ["FERRY_RO_PASS"]
ROOT = os.environ["FERRY_ROOT"]  # the served directory on disk


def connect(user=USER, password=PASS):
    ftp = ftplib.FTP()
    ftp.connect(HOST, PORT, timeout=20)
    if user is not None:
        ftp.login(user, password)
    return ftp


def code(exc):
    return str(exc)[:3]


class Session(unittest.TestCase):
    def setUp(self):
        self.ftp = connect()
        self.ftp.voidcmd("TYPE I")
        self.dir = "/t_" + self._testMethodName
        self.ftp.mkd(self.dir)
        self.ftp.cwd(self.dir)

    def tearDown(self):
        try:
            self.ftp.quit()
        except Exception:
            self.ftp.close()

    def put(self, name, data):
        self.ftp.storbinary("STOR " + name, io.BytesIO(data))

    def get(self, name, rest=None):
        out = io.BytesIO()
        self.ftp.retrbinary("RETR " + name, out.write, rest=rest)
        return out.getvalue()

    def on_disk(self, name):
        return os.path.join(ROOT, self.dir.lstrip("/"), name)

    # --- login and session commands -------------------------------------

    def test_wrong_password_is_530_and_then_login_works(self):
        ftp = connect(None)
        with self.assertRaises(ftplib.error_perm) as e:
            ftp.login(USER, "wrong")
        self.assertEqual(code(e.exception), "530")
        self.assertTrue(ftp.login(USER, PASS).startswith("230"))
        ftp.quit()

    def test_unknown_user_is_530(self):
        ftp = connect(None)
        with self.assertRaises(ftplib.error_perm) as e:
            ftp.login("nobody-here", "x")
        self.assertEqual(code(e.exception), "530")
        ftp.close()

    def test_commands_before_login_are_530(self):
        ftp = connect(None)
        for cmd in ["PWD", "CWD /", "LIST", "PASV", "RETR x", "MKD y", "SIZE z"]:
            with self.assertRaises(ftplib.error_perm) as e:
                ftp.sendcmd(cmd)
            self.assertEqual(code(e.exception), "530", cmd)
        self.assertTrue(ftp.sendcmd("SYST").startswith("215"))
        self.assertTrue(ftp.sendcmd("NOOP").startswith("200"))
        self.assertTrue(ftp.sendcmd("FEAT").startswith("211"))
        ftp.close()

    def test_pass_without_user_is_503(self):
        ftp = connect(None)
        with self.assertRaises(ftplib.error_perm) as e:
            ftp.sendcmd("PASS x")
        self.assertEqual(code(e.exception), "503")
        ftp.close()

    def test_syst_noop_feat_help_stat(self):
        self.assertEqual(self.ftp.sendcmd("SYST"), "215 UNIX Type: L8")
        self.assertTrue(self.ftp.sendcmd("NOOP").startswith("200"))
        feat = self.ftp.sendcmd("FEAT")
        for f in ["EPSV", "EPRT", "MDTM", "MLST", "REST STREAM", "SIZE", "UTF8"]:
            self.assertIn("\n " + f, feat)
        help_ = self.ftp.sendcmd("HELP")
        self.assertTrue(help_.startswith("214"))
        for verb in ["RETR", "STOR", "MLSD", "EPSV", "RNFR", "ABOR"]:
            self.assertIn(verb, help_)
        stat = self.ftp.sendcmd("STAT")
        self.assertTrue(stat.startswith("211"))
        self.assertIn(USER, stat)

    def test_quit_is_221(self):
        ftp = connect()
        self.assertTrue(ftp.quit().startswith("221"))

    def test_unknown_and_malformed_commands(self):
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.sendcmd("XYZZY")
        self.assertEqual(code(e.exception), "500")
        for cmd, want in [("TYPE X", "501"), ("TYPE E", "504"), ("MODE B", "504"), ("STRU R", "504"),
                          ("PORT 1,2,3", "501"), ("EPRT |9|x|1|", "522"), ("REST abc", "501"),
                          ("RETR", "501"), ("ALLO x", "501")]:
            with self.assertRaises(ftplib.error_perm) as e:
                self.ftp.sendcmd(cmd)
            self.assertEqual(code(e.exception), want, cmd)

    # --- directories -------------------------------------------------------

    def test_pwd_cwd_cdup(self):
        self.assertEqual(self.ftp.pwd(), self.dir)
        self.ftp.mkd("sub dir")
        self.assertTrue(self.ftp.cwd("sub dir").startswith("250"))
        self.assertEqual(self.ftp.pwd(), self.dir + "/sub dir")
        self.assertTrue(self.ftp.sendcmd("CDUP").startswith("2"))
        self.assertEqual(self.ftp.pwd(), self.dir)
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.cwd("missing")
        self.assertEqual(code(e.exception), "550")

    def test_mkd_rmd(self):
        self.assertEqual(self.ftp.mkd("new"), self.dir + "/new")
        self.assertTrue(os.path.isdir(self.on_disk("new")))
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.mkd("new")
        self.assertEqual(code(e.exception), "550")
        self.put("new/f", b"x")
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.rmd("new")
        self.assertEqual(code(e.exception), "550")
        self.ftp.delete("new/f")
        self.assertTrue(self.ftp.rmd("new").startswith("250"))
        self.assertFalse(os.path.exists(self.on_disk("new")))

    def test_dotdot_at_the_root_stays_at_the_root(self):
        # As POSIX and the Globus server have it: `..` at the root is the
        # root, so `cd ..` up to the top never fails, and nothing leaves it.
        self.assertTrue(self.ftp.cwd("/").startswith("250"))
        self.assertTrue(self.ftp.sendcmd("CDUP").startswith("250"))
        self.assertEqual(self.ftp.pwd(), "/")
        for up in ["..", "/../..", "../../../.."]:
            self.assertTrue(self.ftp.cwd(up).startswith("250"), up)
            self.assertEqual(self.ftp.pwd(), "/", up)
        self.ftp.cwd(self.dir)
        self.assertTrue(self.ftp.cwd("../../..").startswith("250"))
        self.assertEqual(self.ftp.pwd(), "/")
        # Paths clamp the same way: from a subdirectory, ../../../x is /x.
        self.ftp.cwd(self.dir)
        self.put("here", b"12345")
        self.assertEqual(self.ftp.size("../../../.." + self.dir + "/here"), 5)
        self.assertEqual(self.ftp.size("/../.." + self.dir + "/here"), 5)
        # The host's /etc/passwd is never reached: the root has no etc/.
        for cmd in ["SIZE /../../etc/passwd", "DELE ../../../../etc/passwd", "MDTM ../etc/passwd"]:
            with self.assertRaises(ftplib.error_perm) as e:
                self.ftp.sendcmd(cmd)
            self.assertEqual(code(e.exception), "550", cmd)
            self.assertIn("No such file", str(e.exception), cmd)
        with self.assertRaises(ftplib.error_perm) as e:
            self.get("../../../../etc/passwd")
        self.assertEqual(code(e.exception), "550")
        self.assertIn("/etc/passwd: No such file", str(e.exception))
        # What ../ creates lands inside the served root.
        name = "ferry-escape-%d" % os.getpid()
        self.ftp.mkd("../../../../" + name)
        self.assertTrue(os.path.isdir(os.path.join(ROOT, name)))
        self.assertFalse(os.path.exists(os.path.join("/", name)))
        self.ftp.rmd("/" + name)
        # An absolute path is inside the root, not the host's /etc.
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.size("/etc/passwd")
        self.assertEqual(code(e.exception), "550")

    def test_symlink_out_of_the_root_is_refused(self):
        os.symlink("/etc", self.on_disk("etc-link"))
        os.symlink("/etc/passwd", self.on_disk("passwd-link"))
        for cmd in ["CWD etc-link", "SIZE passwd-link", "SIZE etc-link/passwd"]:
            with self.assertRaises(ftplib.error_perm) as e:
                self.ftp.sendcmd(cmd)
            self.assertEqual(code(e.exception), "550", cmd)
        with self.assertRaises(ftplib.error_perm) as e:
            self.get("passwd-link")
        self.assertEqual(code(e.exception), "550")
        with self.assertRaises(ftplib.error_perm):
            self.put("etc-link/evil", b"x")
        self.assertFalse(os.path.exists("/etc/evil"))

    # --- listings ------------------------------------------------------------

    def test_list_nlst_mlsd_mlst(self):
        self.put("a.txt", b"hello\n")
        self.ftp.mkd("d")
        lines = []
        self.ftp.retrlines("LIST", lines.append)
        self.assertTrue(any(l.startswith("-rw") and l.endswith(" a.txt") and " 6 " in l for l in lines), lines)
        self.assertTrue(any(l.startswith("d") and l.endswith(" d") for l in lines), lines)
        self.assertEqual(sorted(self.ftp.nlst()), ["a.txt", "d"])
        facts = dict(self.ftp.mlsd())
        self.assertEqual(facts["a.txt"]["type"], "file")
        self.assertEqual(facts["a.txt"]["size"], "6")
        self.assertEqual(facts["d"]["type"], "dir")
        mlst = self.ftp.sendcmd("MLST a.txt")
        self.assertTrue(mlst.startswith("250-"))
        self.assertIn("Type=file;Size=6;", mlst)
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.sendcmd("MLST nope")
        self.assertEqual(code(e.exception), "550")
        stat = self.ftp.sendcmd("STAT .")
        self.assertTrue(stat.startswith("213"))
        self.assertIn("a.txt", stat)

    def test_size_mdtm(self):
        self.put("s.bin", b"x" * 1234)
        self.assertEqual(self.ftp.size("s.bin"), 1234)
        mdtm = self.ftp.sendcmd("MDTM s.bin")
        self.assertRegex(mdtm, r"^213 \d{14}$")
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.size("missing")
        self.assertEqual(code(e.exception), "550")

    # --- transfers -------------------------------------------------------

    def test_stor_retr_binary_and_ascii(self):
        data = os.urandom(300_000)
        self.put("r.bin", data)
        self.assertEqual(self.get("r.bin"), data)
        with open(self.on_disk("r.bin"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).digest(), hashlib.sha256(data).digest())
        self.ftp.storlines("STOR t.txt", io.BytesIO(b"one\ntwo\n"))
        with open(self.on_disk("t.txt"), "rb") as f:
            self.assertEqual(f.read(), b"one\ntwo\n")  # CRLF on the wire, LF on disk
        lines = []
        self.ftp.retrlines("RETR t.txt", lines.append)
        self.assertEqual(lines, ["one", "two"])

    def test_passive_and_active_modes(self):
        data = os.urandom(100_000)
        for passive in [True, False]:  # PASV, then PORT
            self.ftp.set_pasv(passive)
            self.put("m.bin", data)
            self.assertEqual(self.get("m.bin"), data)
        self.ftp.set_pasv(True)

    def test_epsv_and_eprt_transfers(self):
        data = os.urandom(100_000)
        self.put("e.bin", data)
        # EPSV (RFC 2428): the client connects to the announced port.
        resp = self.ftp.sendcmd("EPSV")
        port = int(resp.split("|||")[1].split("|")[0])
        conn = socket.create_connection((HOST, port), timeout=10)
        self.assertTrue(self.ftp.sendcmd("RETR e.bin").startswith("150"))
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
        conn.close()
        self.assertTrue(self.ftp.voidresp().startswith("226"))
        self.assertEqual(got, data)
        # EPRT: the server connects to us.
        listener = socket.create_server((HOST, 0))
        self.ftp.sendcmd("EPRT |1|%s|%d|" % (HOST, listener.getsockname()[1]))
        self.assertTrue(self.ftp.sendcmd("STOR e2.bin").startswith("150"))
        conn, _ = listener.accept()
        conn.sendall(data)
        conn.close()
        listener.close()
        self.assertTrue(self.ftp.voidresp().startswith("226"))
        self.assertEqual(self.get("e2.bin"), data)

    def test_epsv_and_eprt_replies(self):
        self.assertRegex(self.ftp.sendcmd("EPSV"), r"^229 .*\(\|\|\|\d+\|\)")
        self.assertRegex(self.ftp.sendcmd("PASV"), r"^227 .*\(127,0,0,1,\d+,\d+\)")
        self.assertTrue(self.ftp.sendcmd("EPRT |1|127.0.0.1|40000|").startswith("200"))

    def test_port_to_a_third_address_is_refused(self):
        for cmd in ["PORT 10,0,0,1,100,100", "EPRT |1|10.0.0.1|25600|", "PORT 127,0,0,1,0,21"]:
            with self.assertRaises(ftplib.error_perm) as e:
                self.ftp.sendcmd(cmd)
            self.assertEqual(code(e.exception), "501", cmd)

    def test_transfer_without_data_setup_is_425(self):
        with self.assertRaises(ftplib.error_temp) as e:
            self.ftp.sendcmd("RETR x")
        self.assertEqual(code(e.exception), "425")

    def test_missing_file_is_550(self):
        with self.assertRaises(ftplib.error_perm) as e:
            self.get("nope.bin")
        self.assertEqual(code(e.exception), "550")
        self.assertIn("No such file", str(e.exception))

    def test_rest_retr_and_appe(self):
        data = bytes(range(256)) * 100
        self.put("r.bin", data)
        self.assertEqual(self.get("r.bin", rest=1000), data[1000:])
        self.ftp.storbinary("APPE r.bin", io.BytesIO(b"tail"))
        self.assertEqual(self.get("r.bin"), data + b"tail")
        with self.assertRaises(ftplib.error_perm) as e:
            self.get("r.bin", rest=10**9)
        self.assertEqual(code(e.exception), "554")

    def test_abor(self):
        self.assertTrue(self.ftp.sendcmd("ABOR").startswith("225"))
        self.put("big.bin", os.urandom(64 << 20))
        conn = self.ftp.transfercmd("RETR big.bin")
        conn.recv(1024)
        # ftplib sends ABOR as TCP urgent data and reads one reply: the 426
        # for the transfer; RFC 959 §4.1.3 then has the server send 226 for
        # the ABOR itself, which ftplib leaves to the caller.
        self.assertTrue(self.ftp.abort().startswith("426"))
        self.assertTrue(self.ftp.voidresp().startswith("226"))
        conn.close()
        self.assertTrue(self.ftp.sendcmd("NOOP").startswith("200"))
        with open(self.on_disk("big.bin"), "rb") as f:
            self.assertEqual(self.get("big.bin"), f.read())

    def test_rename(self):
        self.put("old", b"data")
        self.assertTrue(self.ftp.rename("old", "new name").startswith("250"))
        self.assertEqual(self.get("new name"), b"data")
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.sendcmd("RNTO x")
        self.assertEqual(code(e.exception), "503")
        # RNFR followed by another command forgets the rename.
        self.assertTrue(self.ftp.sendcmd("RNFR new name").startswith("350"))
        self.ftp.sendcmd("NOOP")
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.sendcmd("RNTO other")
        self.assertEqual(code(e.exception), "503")
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.sendcmd("RNFR missing")
        self.assertEqual(code(e.exception), "550")

    def test_dele(self):
        self.put("x", b"1")
        self.assertTrue(self.ftp.delete("x").startswith("250"))
        self.assertFalse(os.path.exists(self.on_disk("x")))
        with self.assertRaises(ftplib.error_perm) as e:
            self.ftp.delete("x")
        self.assertEqual(code(e.exception), "550")

    def test_type_a_and_i(self):
        self.assertTrue(self.ftp.sendcmd("TYPE A").startswith("200"))
        self.assertTrue(self.ftp.sendcmd("TYPE I").startswith("200"))
        self.assertTrue(self.ftp.sendcmd("TYPE L 8").startswith("200"))

    def test_read_only_user_cannot_write(self):
        self.put("ro.txt", b"x")
        ro = connect(RO_USER, RO_PASS)
        ro.cwd(self.dir)
        out = io.BytesIO()
        ro.retrbinary("RETR ro.txt", out.write)
        self.assertEqual(out.getvalue(), b"x")
        for cmd in ["DELE ro.txt", "MKD d", "RMD x", "RNFR ro.txt"]:
            with self.assertRaises(ftplib.error_perm) as e:
                ro.sendcmd(cmd)
            self.assertEqual(code(e.exception), "550", cmd)
        with self.assertRaises(ftplib.error_perm):
            ro.storbinary("STOR w.txt", io.BytesIO(b"x"))
        self.assertFalse(os.path.exists(self.on_disk("w.txt")))
        ro.quit()

    def test_anonymous_is_read_only(self):
        self.put("pub.txt", b"public")
        anon = connect("anonymous", "guest@")
        out = io.BytesIO()
        anon.retrbinary("RETR %s/pub.txt" % self.dir, out.write)
        self.assertEqual(out.getvalue(), b"public")
        with self.assertRaises(ftplib.error_perm) as e:
            anon.storbinary("STOR %s/anon.txt" % self.dir, io.BytesIO(b"x"))
        self.assertEqual(code(e.exception), "550")
        anon.quit()

    def test_partial_upload_never_visible_under_final_name(self):
        conn = self.ftp.transfercmd("STOR inflight.bin")
        conn.sendall(os.urandom(1 << 20))
        # While the upload is open, the final name does not exist and the
        # partial file is not listed.
        self.assertFalse(os.path.exists(self.on_disk("inflight.bin")))
        names = []
        ftp2 = connect()
        ftp2.cwd(self.dir)
        names = ftp2.nlst("-a")
        ftp2.quit()
        self.assertNotIn("inflight.bin", names)
        self.assertFalse(any("ferry-part" in n for n in names), names)
        conn.close()
        self.ftp.voidresp()
        self.assertTrue(os.path.exists(self.on_disk("inflight.bin")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
