package ghsim

// Actor does what a person (or another bot) does on GitHub, through the
// simulator's own state, with the webhooks GitHub would send: the tests'
// "a human did this". Get one with As.
type Actor struct {
	s    *Sim
	user *User
}

// As returns an actor for login, creating the account (type User, or Bot
// when login ends in "[bot]" or is CodingAgentLogin) if it does not exist.
func (s *Sim) As(login string) *Actor {
	typ := TypeUser
	if len(login) > 5 && login[len(login)-5:] == "[bot]" || isCodingAgentLogin(login) {
		typ = TypeBot
	}
	return &Actor{s: s, user: s.AddUser(login, typ)}
}

// User is the actor's account.
func (a *Actor) User() *User { return a.user }
