print("tokenrelay")
