package wire

// KindStop is the kind of the activity record a daemon adds when it starts
// to shut down; the hub, reading the machine's activity, takes it as
// "offline from now on".
const KindStop = "agentd.stop"
