package forkserver

// What the external tests (package forkserver_test) reach of the
// package's insides.
var (
	DirPrefix  = dirPrefix
	SweepStale = sweepStale
)

// CloseLifeline closes the server's lifeline from its driver, as a driver
// killed without a word does (Stop would also remove the socket).
func (f *Server) CloseLifeline() { f.lifeline.Close() }
