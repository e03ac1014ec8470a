package place

// CountsOff makes c's room count every job's candidates over the bits, as
// it did before the counts (counts.go): the straightforward way, for the
// tests that compare the two.
func CountsOff(c *Board) { c.countsOff = true }

// FreeOfModel returns the free GPUs of model m's nodes as c keeps them
// (modelFree, FreeFor's answer) and as its counts of nodes by free GPUs
// give them.
func FreeOfModel(c *Board, m int) (kept, counted int) {
	return c.modelFree[m], c.setCapacity(m, 1, 0)
}
