// manetkit's ns-3 oracle, program "per": the probability that one 802.11 transmission is
// received, as a function of distance, in ns-3 3.37's YansWifiPhy.
//
// One sender broadcasts `frames` frames at the rate under test (no ACK, no retry); receivers
// sit at `step`, 2*step, ... `maxDistance` metres on a line. Receivers never transmit and
// the sender's frames are spaced beyond their airtime, so no two frames overlap and every
// receiver sees each frame alone: what is counted is PHY receptions (the PHY state's RxOk:
// preamble detected, PHY header and payload decoded) against frames sent.
//
// The PSDU is exactly `psduBytes` long: 24-byte MAC header (non-QoS data, IBSS) + 8-byte
// LLC/SNAP + payload + 4-byte FCS, checked against the PHY's own PhyTxPsduBegin trace.
//
// Output: one JSON object on stdout (parameters echoed, per distance sent/received and the
// PHY's drop reasons).
//
// Built by manetkit.bench.oracle.build against Debian's libns3-dev (pkg-config ns3-wifi...).

#include "common.h"

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/wifi-module.h"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

constexpr uint32_t kMacOverheadBytes = 24 + 8 + 4; // MAC header + LLC/SNAP + FCS

struct Counters
{
    uint64_t received = 0;
    uint64_t payloadErrors = 0;
    std::map<std::string, uint64_t> drops;
};

std::vector<Counters> g_counters;
uint32_t g_psduSeen = 0;
uint64_t g_txCount = 0;

void
OnRxOk(uint32_t idx, Ptr<const Packet>, double, WifiMode, WifiPreamble)
{
    g_counters[idx].received++;
}

void
OnRxError(uint32_t idx, Ptr<const Packet>, double)
{
    g_counters[idx].payloadErrors++;
}

void
OnRxDrop(uint32_t idx, Ptr<const Packet>, WifiPhyRxfailureReason reason)
{
    std::ostringstream os;
    os << reason;
    g_counters[idx].drops[os.str()]++;
}

void
OnTxPsdu(WifiConstPsduMap psdus, WifiTxVector, double)
{
    g_txCount++;
    g_psduSeen = psdus.begin()->second->GetSize();
}

void
SendOne(Ptr<NetDevice> dev, uint32_t payload)
{
    dev->Send(Create<Packet>(payload), Mac48Address::GetBroadcast(), 0x88B5);
}

std::string
ModeName(const std::string& standard, double rateMbps)
{
    if (standard == "802.11b")
    {
        const std::string mode = oracle::DsssModeName(rateMbps);
        if (!mode.empty())
            return mode;
    }
    else if (standard == "802.11g")
    {
        static const int rates[] = {6, 9, 12, 18, 24, 36, 48, 54};
        for (int r : rates)
        {
            if (rateMbps == r)
                return "ErpOfdmRate" + std::to_string(r) + "Mbps";
        }
    }
    NS_ABORT_MSG("rateMbps " << rateMbps << " is not a rate of " << standard);
    return "";
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string standard = "802.11b";
    double rateMbps = 1;
    uint32_t psduBytes = 60;
    uint32_t frames = 1000;
    double step = 10;
    double maxDistance = 300;
    oracle::PhyParams params;
    uint32_t seed = 1;
    uint64_t run = 1;

    CommandLine cmd(__FILE__);
    cmd.AddValue("standard", "802.11b or 802.11g", standard);
    cmd.AddValue("rateMbps", "PHY rate of every frame (Mbit/s)", rateMbps);
    cmd.AddValue("psduBytes", "PSDU length: MAC header + LLC/SNAP + payload + FCS", psduBytes);
    cmd.AddValue("frames", "frames sent", frames);
    cmd.AddValue("step", "distance between receivers (m)", step);
    cmd.AddValue("maxDistance", "farthest receiver (m)", maxDistance);
    params.AddValues(cmd);
    cmd.AddValue("seed", "RngSeed", seed);
    cmd.AddValue("run", "RngRun", run);
    cmd.Parse(argc, argv);

    NS_ABORT_MSG_IF(psduBytes <= kMacOverheadBytes,
                    "psduBytes must exceed the " << kMacOverheadBytes << "-byte MAC overhead");
    NS_ABORT_MSG_IF(step <= 0 || maxDistance < step, "need 0 < step <= maxDistance");
    RngSeedManager::SetSeed(seed);
    RngSeedManager::SetRun(run);

    const std::string mode = ModeName(standard, rateMbps);
    const uint32_t nRx = static_cast<uint32_t>(std::floor(maxDistance / step + 1e-9));

    NodeContainer nodes = oracle::NodesOnALine(1 + nRx, step);

    YansWifiPhyHelper phy;
    params.Configure(phy,
                     standard == "802.11b" ? "{1, 22, BAND_2_4GHZ, 0}" : "{1, 20, BAND_2_4GHZ, 0}");

    WifiHelper wifi;
    wifi.SetStandard(standard == "802.11b" ? WIFI_STANDARD_80211b : WIFI_STANDARD_80211g);
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                 "DataMode", StringValue(mode),
                                 "ControlMode", StringValue(mode),
                                 "NonUnicastMode", StringValue(mode));
    WifiMacHelper mac;
    mac.SetType("ns3::AdhocWifiMac", "QosSupported", BooleanValue(false));
    NetDeviceContainer devs = wifi.Install(phy, mac, nodes);

    g_counters.assign(nRx, Counters());
    for (uint32_t i = 1; i <= nRx; ++i)
    {
        Ptr<WifiPhy> p = DynamicCast<WifiNetDevice>(devs.Get(i))->GetPhy();
        p->GetState()->TraceConnectWithoutContext("RxOk", MakeBoundCallback(&OnRxOk, i - 1));
        p->TraceConnectWithoutContext("PhyRxDrop", MakeBoundCallback(&OnRxDrop, i - 1));
        p->GetState()->TraceConnectWithoutContext("RxError",
                                                  MakeBoundCallback(&OnRxError, i - 1));
    }
    Ptr<WifiPhy> txPhy = DynamicCast<WifiNetDevice>(devs.Get(0))->GetPhy();
    txPhy->TraceConnectWithoutContext("PhyTxPsduBegin", MakeCallback(&OnTxPsdu));

    // Frames spaced by their airtime + 2 ms (> DIFS + the largest first backoff).
    WifiTxVector txv;
    txv.SetMode(WifiMode(mode));
    txv.SetPreambleType(WIFI_PREAMBLE_LONG);
    txv.SetChannelWidth(standard == "802.11b" ? 22 : 20);
    Time airtime = WifiPhy::CalculateTxDuration(psduBytes, txv, WIFI_PHY_BAND_2_4GHZ);
    Time interval = airtime + MilliSeconds(2);
    const uint32_t payload = psduBytes - kMacOverheadBytes;
    Time start = Seconds(0.1);
    for (uint32_t k = 0; k < frames; ++k)
    {
        Simulator::Schedule(start + interval * k, &SendOne, devs.Get(0), payload);
    }
    Simulator::Stop(start + interval * (frames + 2));
    Simulator::Run();
    Simulator::Destroy();

    NS_ABORT_MSG_IF(g_txCount != frames,
                    "the sender transmitted " << g_txCount << " frames, not " << frames);
    NS_ABORT_MSG_IF(g_psduSeen != psduBytes,
                    "the PHY sent " << g_psduSeen << "-byte PSDUs, not " << psduBytes);

    std::ostringstream out;
    out << std::setprecision(10);
    out << "{\"program\": \"per\", \"standard\": \"" << standard << "\", \"rate_mbps\": " << rateMbps
        << ", \"mode\": \"" << mode << "\", \"psdu_bytes\": " << psduBytes
        << ", \"frames\": " << frames << ", \"interval_s\": " << interval.GetSeconds()
        << ", \"airtime_s\": " << airtime.GetSeconds();
    params.WriteJson(out);
    out << ", \"seed\": " << seed << ", \"run\": " << run << ", \"points\": [";
    for (uint32_t i = 0; i < nRx; ++i)
    {
        const Counters& c = g_counters[i];
        out << (i ? ", " : "") << "{\"distance_m\": " << (i + 1) * step
            << ", \"sent\": " << frames << ", \"received\": " << c.received
            << ", \"payload_errors\": " << c.payloadErrors << ", \"drops\": {";
        bool first = true;
        for (const auto& [reason, n] : c.drops)
        {
            out << (first ? "" : ", ") << "\"" << reason << "\": " << n;
            first = false;
        }
        out << "}}";
    }
    out << "]}";
    std::cout << out.str() << std::endl;
    return 0;
}
