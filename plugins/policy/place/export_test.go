package place

// CountsOff makes c's room count every job's candidates over the bits, as
// it did before the counts (counts.go): the straightforward way, for the
// tests that compare the two.
func CountsOff(c *Board) { c.countsOff = true }
