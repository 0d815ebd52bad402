package loader

// SetRemoteHorizon sets how many batches a stream's registered shard list covers (remoteHorizon) and returns the
// function that restores it: tests move the list on every few batches.
func SetRemoteHorizon(n int) (restore func()) {
	old := remoteHorizon
	remoteHorizon = n
	return func() { remoteHorizon = old }
}
