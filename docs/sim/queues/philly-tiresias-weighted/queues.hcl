queue "0e4a51" {
  nominal = 2
  weight  = 2
}
queue "103959" {
  nominal = 12
  weight  = 12
}
queue "11cb48" {
  nominal = 3
  weight  = 3
}
queue "23dbec" {
  nominal = 1
  weight  = 1
}
queue "2869ce" {
  nominal = 35
  weight  = 35
}
queue "6214e9" {
  nominal = 59
  weight  = 59
}
queue "6c71a0" {
  nominal = 39
  weight  = 39
}
queue "7f04ca" {
  nominal = 212
  weight  = 212
}
queue "b436b2" {
  nominal = 172
  weight  = 172
}
queue "e13805" {
  nominal = 6
  weight  = 6
}
queue "ed69ec" {
  nominal = 4
  weight  = 4
}
queue "ee9e8c" {
  nominal = 95
  weight  = 95
}
