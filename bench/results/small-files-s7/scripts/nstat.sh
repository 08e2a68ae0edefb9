#!/bin/bash
# run inside ferry-wan up: packet counts in both namespaces around one trace
NS=${NS:-i18s7}
ip netns exec $NS-c nstat -n >/dev/null; ip netns exec $NS-s nstat -n > /dev/null
NS=$NS "$(dirname $0)/trace.sh"
echo "client ns:"; ip netns exec $NS-c nstat | grep -E "TcpOutSegs|TcpInSegs|TcpRetrans|DelayedACK|TcpExtTCPPureAcks|TCPHPAcks"
echo "server ns:"; ip netns exec $NS-s nstat | grep -E "TcpOutSegs|TcpInSegs|TcpRetrans|DelayedACK|TcpExtTCPPureAcks|TCPHPAcks"
