// manetkit's ns-3 oracle: what the programs "per" and "chain" share, so that both
// simulate the same radio. Nodes on a line, and the YansWifiPhy of manetkit's realistic
// profiles: log-distance path loss, optional Nakagami fading, transmit power and antenna
// gains, noise figure, CCA energy detection, ThresholdPreambleDetectionModel and
// NistErrorRateModel; the same command-line options for its parameters, and the same
// "params" object in the JSON output. The 802.11b (DSSS) rates' ns-3 mode names.
//
// Built by manetkit.bench.oracle.build, which copies this header beside the program.

#ifndef MANETKIT_ORACLE_COMMON_H
#define MANETKIT_ORACLE_COMMON_H

#include "ns3/core-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"

#include <ostream>
#include <string>

namespace oracle
{

using namespace ns3;

// The radio's parameters (defaults: manetkit's outdoor 802.11b profile).
struct PhyParams
{
    double txPowerDbm = 16.0206;
    double antennaGain = 0;
    double exponent = 3.0;
    double referenceDistance = 1.0;
    double referenceLoss = 40.0953;
    double nakagamiM = 0; // 0: no fading
    double noiseFigure = 7;
    double preambleMinRssi = -97;
    double preambleMinSnr = -5;
    double ccaEdThreshold = -62;

    // One command-line option per parameter.
    void AddValues(CommandLine& cmd)
    {
        cmd.AddValue("txPowerDbm", "transmit power (dBm)", txPowerDbm);
        cmd.AddValue("antennaGain", "antenna gain of the sender and the receivers (dBi)", antennaGain);
        cmd.AddValue("exponent", "log-distance path loss exponent", exponent);
        cmd.AddValue("referenceDistance", "log-distance reference distance (m)", referenceDistance);
        cmd.AddValue("referenceLoss", "log-distance loss at the reference distance (dB)", referenceLoss);
        cmd.AddValue("nakagamiM", "Nakagami m in every distance band (0: no fading)", nakagamiM);
        cmd.AddValue("noiseFigure", "receiver noise figure (dB)", noiseFigure);
        cmd.AddValue("preambleMinRssi", "ThresholdPreambleDetectionModel MinimumRssi (dBm)", preambleMinRssi);
        cmd.AddValue("preambleMinSnr", "ThresholdPreambleDetectionModel Threshold (dB)", preambleMinSnr);
        cmd.AddValue("ccaEdThreshold", "CCA energy-detect threshold (dBm)", ccaEdThreshold);
    }

    // The channel (path loss, fading) and the PHY on it; ``channelSettings`` is the PHY's
    // ChannelSettings attribute (channel 1: 22 MHz wide for 802.11b, 20 MHz for 802.11g).
    void Configure(YansWifiPhyHelper& phy, const std::string& channelSettings) const
    {
        YansWifiChannelHelper channel;
        channel.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel");
        channel.AddPropagationLoss("ns3::LogDistancePropagationLossModel",
                                   "Exponent", DoubleValue(exponent),
                                   "ReferenceDistance", DoubleValue(referenceDistance),
                                   "ReferenceLoss", DoubleValue(referenceLoss));
        if (nakagamiM > 0)
        {
            channel.AddPropagationLoss("ns3::NakagamiPropagationLossModel",
                                       "m0", DoubleValue(nakagamiM),
                                       "m1", DoubleValue(nakagamiM),
                                       "m2", DoubleValue(nakagamiM));
        }
        phy.SetChannel(channel.Create());
        phy.Set("TxPowerStart", DoubleValue(txPowerDbm));
        phy.Set("TxPowerEnd", DoubleValue(txPowerDbm));
        phy.Set("TxGain", DoubleValue(antennaGain));
        phy.Set("RxGain", DoubleValue(antennaGain));
        phy.Set("RxNoiseFigure", DoubleValue(noiseFigure));
        phy.Set("CcaEdThreshold", DoubleValue(ccaEdThreshold));
        phy.Set("ChannelSettings", StringValue(channelSettings));
        phy.SetErrorRateModel("ns3::NistErrorRateModel");
        phy.SetPreambleDetectionModel("ns3::ThresholdPreambleDetectionModel",
                                      "MinimumRssi", DoubleValue(preambleMinRssi),
                                      "Threshold", DoubleValue(preambleMinSnr));
    }

    // The JSON member `, "params": {...}` (the stream's precision is the caller's).
    void WriteJson(std::ostream& out) const
    {
        out << ", \"params\": {\"tx_power_dbm\": " << txPowerDbm
            << ", \"antenna_gain_dbi\": " << antennaGain
            << ", \"path_loss_exponent\": " << exponent
            << ", \"reference_distance_m\": " << referenceDistance
            << ", \"reference_loss_db\": " << referenceLoss
            << ", \"nakagami_m\": " << (nakagamiM > 0 ? std::to_string(nakagamiM) : "null")
            << ", \"noise_figure_db\": " << noiseFigure
            << ", \"preamble_min_rssi_dbm\": " << preambleMinRssi
            << ", \"preamble_min_snr_db\": " << preambleMinSnr
            << ", \"cca_ed_threshold_dbm\": " << ccaEdThreshold << "}";
    }
};

// ``count`` static nodes on the x axis, ``spacing`` metres apart, the first at 0.
inline NodeContainer
NodesOnALine(uint32_t count, double spacing)
{
    NodeContainer nodes;
    nodes.Create(count);
    MobilityHelper mobility;
    Ptr<ListPositionAllocator> pos = CreateObject<ListPositionAllocator>();
    for (uint32_t i = 0; i < count; ++i)
    {
        pos->Add(Vector(i * spacing, 0, 0));
    }
    mobility.SetPositionAllocator(pos);
    mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
    mobility.Install(nodes);
    return nodes;
}

// The ns-3 mode of an 802.11b rate, or "" for a rate 802.11b does not have.
inline std::string
DsssModeName(double rateMbps)
{
    if (rateMbps == 1)
        return "DsssRate1Mbps";
    if (rateMbps == 2)
        return "DsssRate2Mbps";
    if (rateMbps == 5.5)
        return "DsssRate5_5Mbps";
    if (rateMbps == 11)
        return "DsssRate11Mbps";
    return "";
}

} // namespace oracle

#endif
