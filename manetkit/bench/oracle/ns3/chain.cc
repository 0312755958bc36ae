// manetkit's ns-3 oracle, program "chain": bulk TCP throughput over a static chain of
// `hops` 802.11b hops in ns-3 3.37 (Holland & Vaidya's chain table T_i).
//
// Nodes 0..hops on a line, `hopLength` metres apart, the same YansWifiPhy settings as
// program "per" (common.h: log-distance path loss, optional Nakagami fading, noise figure,
// preamble detection thresholds, NistErrorRateModel). IBSS (AdhocWifiMac, no QoS), unicast data at
// `rateMbps` (ConstantRateWifiManager), ACKs and retries as ns-3's 802.11 defaults, no
// RTS/CTS. Static host routes along the chain and ARP caches filled before the start
// (NeighborCacheHelper), so nothing is ever broadcast. One BulkSend TCP flow from node 0 to
// node `hops` (TCP CUBIC, ns-3 3.37's default; 1448-byte segments in 1500-byte IP packets).
//
// Output: one JSON object on stdout: the parameters and the goodput at the sink between
// `warmup` and `duration` seconds after the flow starts.
//
// Built by manetkit.bench.oracle.build against Debian's libns3-dev.

#include "common.h"

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/wifi-module.h"

#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

using namespace ns3;

namespace
{

uint64_t g_rxAtWarmup = 0;
uint64_t g_macFinalFailures = 0;
uint64_t g_macRetries = 0;

void
RecordWarmup(Ptr<PacketSink> sink)
{
    g_rxAtWarmup = sink->GetTotalRx();
}

void
OnFinalDataFailed(Mac48Address)
{
    g_macFinalFailures++;
}

void
OnDataFailed(Mac48Address)
{
    g_macRetries++;
}

} // namespace

int
main(int argc, char* argv[])
{
    uint32_t hops = 1;
    double hopLength = 80;
    double rateMbps = 11;
    double duration = 30;
    double warmup = 5;
    oracle::PhyParams params;
    uint32_t segmentSize = 1448;
    uint32_t seed = 1;
    uint64_t run = 1;

    CommandLine cmd(__FILE__);
    cmd.AddValue("hops", "hops in the chain", hops);
    cmd.AddValue("hopLength", "distance between neighbours (m)", hopLength);
    cmd.AddValue("rateMbps", "unicast data rate (Mbit/s)", rateMbps);
    cmd.AddValue("duration", "seconds the flow runs", duration);
    cmd.AddValue("warmup", "seconds from the flow's start before counting", warmup);
    params.AddValues(cmd);
    cmd.AddValue("segmentSize", "TCP segment size (bytes)", segmentSize);
    cmd.AddValue("seed", "RngSeed", seed);
    cmd.AddValue("run", "RngRun", run);
    cmd.Parse(argc, argv);

    NS_ABORT_MSG_IF(hops < 1, "hops must be at least 1");
    NS_ABORT_MSG_IF(warmup >= duration, "warmup must be shorter than duration");
    RngSeedManager::SetSeed(seed);
    RngSeedManager::SetRun(run);
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(segmentSize));
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));

    const std::string mode = oracle::DsssModeName(rateMbps);
    NS_ABORT_MSG_IF(mode.empty(), "rateMbps " << rateMbps << " is not an 802.11b rate");
    NodeContainer nodes = oracle::NodesOnALine(hops + 1, hopLength);

    YansWifiPhyHelper phy;
    params.Configure(phy, "{1, 22, BAND_2_4GHZ, 0}");

    WifiHelper wifi;
    wifi.SetStandard(WIFI_STANDARD_80211b);
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                 "DataMode", StringValue(mode),
                                 "ControlMode", StringValue("DsssRate1Mbps"),
                                 "NonUnicastMode", StringValue("DsssRate1Mbps"));
    WifiMacHelper mac;
    mac.SetType("ns3::AdhocWifiMac", "QosSupported", BooleanValue(false));
    NetDeviceContainer devs = wifi.Install(phy, mac, nodes);
    for (uint32_t i = 0; i < devs.GetN(); ++i)
    {
        devs.Get(i)->SetMtu(1500);
        Ptr<WifiNetDevice> wd = DynamicCast<WifiNetDevice>(devs.Get(i));
        wd->GetRemoteStationManager()->TraceConnectWithoutContext(
            "MacTxFinalDataFailed", MakeCallback(&OnFinalDataFailed));
        wd->GetRemoteStationManager()->TraceConnectWithoutContext("MacTxDataFailed",
                                                                  MakeCallback(&OnDataFailed));
    }

    InternetStackHelper internet;
    internet.SetRoutingHelper(Ipv4StaticRoutingHelper());
    internet.Install(nodes);
    Ipv4AddressHelper addresses;
    addresses.SetBase("10.1.0.0", "255.255.0.0");
    Ipv4InterfaceContainer ifs = addresses.Assign(devs);
    Ipv4StaticRoutingHelper staticRouting;
    const Ipv4Address first = ifs.GetAddress(0);
    const Ipv4Address last = ifs.GetAddress(hops);
    for (uint32_t i = 0; i <= hops; ++i)
    {
        Ptr<Ipv4StaticRouting> r =
            staticRouting.GetStaticRouting(nodes.Get(i)->GetObject<Ipv4>());
        if (i < hops)
        {
            r->AddHostRouteTo(last, ifs.GetAddress(i + 1), 1);
        }
        if (i > 0)
        {
            r->AddHostRouteTo(first, ifs.GetAddress(i - 1), 1);
        }
    }
    NeighborCacheHelper neighbours;
    neighbours.PopulateNeighborCache();

    const uint16_t port = 9;
    PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer sinkApp = sinkHelper.Install(nodes.Get(hops));
    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(last, port));
    bulk.SetAttribute("MaxBytes", UintegerValue(0));
    bulk.SetAttribute("SendSize", UintegerValue(segmentSize));
    ApplicationContainer bulkApp = bulk.Install(nodes.Get(0));
    const double start = 1.0;
    sinkApp.Start(Seconds(0.5));
    bulkApp.Start(Seconds(start));
    bulkApp.Stop(Seconds(start + duration));
    Ptr<PacketSink> sink = DynamicCast<PacketSink>(sinkApp.Get(0));
    Simulator::Schedule(Seconds(start + warmup), &RecordWarmup, sink);
    Simulator::Stop(Seconds(start + duration));
    Simulator::Run();
    const uint64_t total = sink->GetTotalRx();
    Simulator::Destroy();

    const double measured = duration - warmup;
    const double mbps = (total - g_rxAtWarmup) * 8.0 / measured / 1e6;
    std::ostringstream out;
    out << std::setprecision(10);
    out << "{\"program\": \"chain\", \"hops\": " << hops << ", \"hop_length_m\": " << hopLength
        << ", \"rate_mbps\": " << rateMbps << ", \"mode\": \"" << mode << "\""
        << ", \"tcp\": \"TcpCubic\", \"segment_bytes\": " << segmentSize
        << ", \"duration_s\": " << duration << ", \"warmup_s\": " << warmup;
    params.WriteJson(out);
    out << ", \"seed\": " << seed << ", \"run\": " << run
        << ", \"received_bytes\": " << (total - g_rxAtWarmup) << ", \"throughput_mbps\": " << mbps
        << ", \"mac_data_failures\": " << g_macRetries
        << ", \"mac_final_failures\": " << g_macFinalFailures << "}";
    std::cout << out.str() << std::endl;
    return 0;
}
