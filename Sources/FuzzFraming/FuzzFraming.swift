@main
enum FuzzFraming {
    static func main() {}
}
