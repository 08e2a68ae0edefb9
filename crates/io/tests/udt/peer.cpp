// A minimal UDT4 peer for Ferry's interoperability tests, built at test
// time against Debian's libudt (g++ peer.cpp -ludt -lpthread).
//
//   peer server PORT MODE BYTES [MSS]     listen on 127.0.0.1:PORT (0: any; UDT_PEER_BIND=IP to
//                                         listen elsewhere), one connection
//   peer client HOST PORT MODE BYTES [MSS]
//
// MODE is "send" (write BYTES of the test pattern, then close, which waits
// for the peer to acknowledge everything), "recv" (read BYTES and check
// every byte against the pattern) or "sink" (read to the end, no check).
// Prints "PORT n" once listening, then "OK bytes seconds cpu_seconds".
#include <udt/udt.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

static unsigned char pattern(uint64_t i) {
    uint64_t x = i * 0x9E3779B97F4A7C15ULL;
    return (unsigned char)((x >> 56) ^ (i & 0xff));
}

static double now_s() {
    timeval tv;
    gettimeofday(&tv, 0);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

static double cpu_s() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int fail(const char* what) {
    fprintf(stderr, "peer: %s: %s\n", what, UDT::getlasterror().getErrorMessage());
    return 1;
}

// With UDT_PEER_TRACE set, libudt's own view of the connection once a second.
static void trace(UDTSOCKET s, double& next) {
    if (!getenv("UDT_PEER_TRACE") || now_s() < next) return;
    next = now_s() + 1;
    UDT::TRACEINFO p;
    if (UDT::perfmon(s, &p, true) == UDT::ERROR) return;
    fprintf(stderr, "peer: send %.1f Mb/s recv %.1f Mb/s rtt %.3f ms cwnd %d flow %d period %.2f us loss %d/%d retx %d ack %d/%d nak %d/%d bw %.1f Mb/s\n",
            p.mbpsSendRate, p.mbpsRecvRate, p.msRTT, p.pktCongestionWindow, p.pktFlowWindow, p.usPktSndPeriod,
            p.pktSndLoss, p.pktRcvLoss, p.pktRetrans, p.pktSentACK, p.pktRecvACK, p.pktSentNAK, p.pktRecvNAK,
            p.mbpsBandwidth);
}

static int run(UDTSOCKET s, const std::string& mode, uint64_t bytes) {
    std::vector<char> buf(1 << 20);
    double next = 0;
    double t0 = now_s(), c0 = cpu_s();
    uint64_t done = 0;
    if (mode == "send") {
        while (done < bytes) {
            int k = (int)std::min<uint64_t>(buf.size(), bytes - done);
            for (int i = 0; i < k; ++i) buf[i] = (char)pattern(done + i);
            int off = 0;
            while (off < k) {
                trace(s, next);
                int n = UDT::send(s, &buf[off], k - off, 0);
                if (n == UDT::ERROR) return fail("send");
                off += n;
            }
            done += k;
        }
    } else {
        bool check = mode == "recv";
        while (done < bytes) {
            int want = (int)std::min<uint64_t>(buf.size(), bytes - done);
            trace(s, next);
            int n = UDT::recv(s, &buf[0], want, 0);
            if (n == UDT::ERROR) {
                if (mode == "sink") break;
                fprintf(stderr, "peer: recv after %llu bytes: %s\n", (unsigned long long)done,
                        UDT::getlasterror().getErrorMessage());
                return 1;
            }
            if (check)
                for (int i = 0; i < n; ++i)
                    if ((unsigned char)buf[i] != pattern(done + i)) {
                        fprintf(stderr, "peer: byte %llu differs\n", (unsigned long long)(done + i));
                        return 1;
                    }
            done += n;
        }
    }
    // close() lingers until every byte sent has been acknowledged
    UDT::close(s);
    printf("OK %llu %.3f %.3f\n", (unsigned long long)done, now_s() - t0, cpu_s() - c0);
    fflush(stdout);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: peer server PORT MODE BYTES [MSS] | peer client HOST PORT MODE BYTES [MSS]\n");
        return 2;
    }
    std::string role = argv[1];
    bool server = role == "server";
    int a = server ? 2 : 3;
    if (argc < a + 3) return 2;
    std::string mode = argv[a + 1];
    uint64_t bytes = strtoull(argv[a + 2], 0, 10);
    int mss = argc > a + 3 ? atoi(argv[a + 3]) : 1500;
    UDT::startup();
    UDTSOCKET s = UDT::socket(AF_INET, SOCK_STREAM, 0);
    if (UDT::setsockopt(s, 0, UDT_MSS, &mss, sizeof mss) == UDT::ERROR) return fail("UDT_MSS");
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    if (server) {
        addr.sin_port = htons(atoi(argv[2]));
        const char* bind_ip = getenv("UDT_PEER_BIND");  // default: loopback only
        inet_pton(AF_INET, bind_ip ? bind_ip : "127.0.0.1", &addr.sin_addr);
        if (UDT::bind(s, (sockaddr*)&addr, sizeof addr) == UDT::ERROR) return fail("bind");
        if (UDT::listen(s, 4) == UDT::ERROR) return fail("listen");
        int len = sizeof addr;
        UDT::getsockname(s, (sockaddr*)&addr, &len);
        printf("PORT %d\n", ntohs(addr.sin_port));
        fflush(stdout);
        sockaddr_in peer;
        int plen = sizeof peer;
        UDTSOCKET c = UDT::accept(s, (sockaddr*)&peer, &plen);
        if (c == UDT::INVALID_SOCK) return fail("accept");
        int r = run(c, mode, bytes);
        UDT::close(s);
        UDT::cleanup();
        return r;
    }
    addr.sin_port = htons(atoi(argv[3]));
    if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1) {
        fprintf(stderr, "peer: bad address %s\n", argv[2]);
        return 2;
    }
    if (UDT::connect(s, (sockaddr*)&addr, sizeof addr) == UDT::ERROR) return fail("connect");
    int r = run(s, mode, bytes);
    UDT::cleanup();
    return r;
}
