package policy

import "strconv"

// Count is n and noun in words, the noun plural unless n is 1: "1 GPU",
// "4 GPUs", "2 nodes". Nouns with an irregular plural do not belong here.
func Count(n int, noun string) string {
	if n == 1 {
		return strconv.Itoa(n) + " " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// GPUs is a GPU count in words, "1 GPU", "4 GPUs": the one way the
// policies' reasons, the planner's events and the CLI write one.
func GPUs(n int) string { return Count(n, "GPU") }
