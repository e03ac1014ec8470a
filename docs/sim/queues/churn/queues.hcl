queue "a" {
  nominal = 4
}
queue "b" {
  nominal = 4
}
